from nas.search.cli import main

main()

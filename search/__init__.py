"""The search engine and its CLI, in rooms with a one-way order of imports (each uses only
those below it; tests/architecture keeps it so):

    cli -> results, workers -> engine -> training, hardware, deploy -> nets, data -> space
        -> records, runtime

See docs/architecture.md for what each room holds and where a newcomer starts.
"""

"""MkDocs hooks (mkdocs.yml `hooks:`): the guide's pages that are generated, so they cannot drift.

- `index.md`: README.md, the front page on GitHub and in the site alike.
- `reference/space.md`: every key of the space file, from the pydantic schema (search/space/):
  its type or domain, default and description, in place of the marker in the page's source.
- `benchmarks/*.md`: one page per `## ` section of benchmarks/RESULTS.md (which stays the one
  file where figures are written), with the plots those sections show.

The pages link as GitHub reads them, from the file they are in (`docs/x.md` from the README,
`../benchmarks/RESULTS.md#section` from a page of docs/), so every page reads on GitHub too;
each link is pointed at the page that shows it in the site as the page is built.

MkDocs has no plug-in for any of this (mkdocstrings documents Python objects, not a pydantic
schema as a file format; a page per section of one Markdown file is ours), hence these few
functions. A generated benchmark page that the nav does not list is a warning, so `mkdocs build
--strict` fails when RESULTS.md gains a section the guide does not show.
"""

from __future__ import annotations

import json
import logging
import posixpath
import re
import types
import typing
from pathlib import Path
from typing import Any, Literal

from markdown.extensions.toc import slugify
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.nav import Navigation
from mkdocs.structure.pages import Page
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "RESULTS.md"
README = REPO / "README.md"
SPACE_REFERENCE_MARK = "<!-- generated: every key of the schema (scripts/docs_hooks.py) -->"
log = logging.getLogger("mkdocs.hooks.nas")


# ---- the space file's reference ----------------------------------------------------------


def _type_text(annotation: Any) -> str:
    """A field's type in the words of a YAML file (str, int, one of a | b, list of ...)."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_text(args[0])
    if origin is Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        kept = [a for a in args if a is not type(None)]
        text = " or ".join(_type_text(a) for a in kept)
        return text + " or null" if len(kept) < len(args) else text
    if origin in (list, tuple):
        inner = _type_text(args[0]) if args else "value"
        return f"list of {inner}"
    if origin is dict:
        return "mapping"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "mapping"
    return getattr(annotation, "__name__", str(annotation))


def _searchable(info: FieldInfo) -> str | None:
    """`searchable int, 1 to 16` for a field parsed into a search parameter, else None."""
    for meta in info.metadata:
        if hasattr(meta, "kind") and hasattr(meta, "check"):  # search/space/base.py Parsed
            domain = f", {meta.check}" if meta.check is not None else ""
            return f"{meta.kind}{domain} (searchable)"
    return None


def _bounds(info: FieldInfo) -> str:
    words = []
    for meta in info.metadata:
        for name, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            if (value := getattr(meta, name, None)) is not None:
                words.append(f"{sign} {value:g}" if isinstance(value, float) else f"{sign} {value}")
    return f" ({', '.join(words)})" if words else ""


def _default_text(info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    value = info.get_default(call_default_factory=True) if info.default is PydanticUndefined else info.default
    if isinstance(value, BaseModel):
        return ""
    if hasattr(value, "kind") and hasattr(value, "fixed"):  # a fixed search parameter (Param)
        value = value.value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, dict | list):
        return f"`{json.dumps(value)}`"  # YAML's flow style reads it as written
    if hasattr(value, "value") and isinstance(value.value, str):  # a StrEnum member
        return f"`{value.value}`"
    return f"`{value}`"


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The schema models a field holds: itself, or inside list[...], X | None, Annotated[...]."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in typing.get_args(annotation) for model in _models_in(arg)]


def space_reference() -> str:
    """The reference page: one section per part of the file, a row per key."""
    from nas.search.space import space_schema

    sections: list[str] = []
    queue: list[tuple[str, type[BaseModel]]] = [("", space_schema())]
    seen: set[str] = set()
    while queue:
        path, model = queue.pop(0)
        if path in seen:
            continue
        seen.add(path)
        title = f"`{path}`" if path else "Top level"
        doc = (model.__doc__ or "").strip()
        lines = [f"## {title}", ""]
        if doc and not doc.startswith(model.__name__ + "("):  # pydantic's generated docstring
            lines += [" ".join(doc.split()), ""]
        lines += ["| key | type | default | what it is |", "|---|---|---|---|"]
        for name, info in model.model_fields.items():
            nested = _models_in(info.annotation)
            key = f"{path}.{name}" if path else name
            if nested:
                is_list = typing.get_origin(info.annotation) is list
                child = f"{key}[]" if is_list else key
                queue.append((child, nested[0]))
                # The anchor Python-Markdown makes of the heading (its toc slugify).
                anchor = re.sub(r"[^\w\s-]", "", child).strip().lower()
                kind = f"[{'list of ' if is_list else ''}mapping](#{anchor})"
            else:
                kind = _searchable(info) or (_type_text(info.annotation) + _bounds(info))
            described = " ".join((info.description or "").split()).replace("|", "\\|")
            described = described.removeprefix("searchable: ")  # the type column says so
            lines.append(f"| `{name}` | {kind} | {_default_text(info)} | {described} |")
        sections.append("\n".join(lines))
    return "\n\n".join(sections) + "\n"


# ---- benchmarks/RESULTS.md, a page per section --------------------------------------------


def _slug(title: str) -> str:
    module = re.search(r"`benchmarks/(\w+)\.py`", title)
    if module:
        return module.group(1).replace("_", "-")
    words = re.split(r"[:(]", title, maxsplit=1)[0]
    return re.sub(r"[^a-z0-9]+", "-", words.lower()).strip("-")


def _github_anchors(text: str) -> list[tuple[str, int, str]]:
    """(anchor, level, title) of each heading, in order, as GitHub makes the anchor: the text
    without code marks, lowercased, punctuation but `-` and `_` dropped, each space a hyphen,
    `-1`, `-2` ... after a repeat. RESULTS.md links its own sections so (its index)."""
    seen: dict[str, int] = {}
    found: list[tuple[str, int, str]] = []
    for hashes, title in re.findall(r"(?m)^(#{1,6}) (.+)$", text):
        base = re.sub(r"[^\w\- ]", "", title.replace("`", "").lower()).replace(" ", "-")
        repeat = seen.get(base, 0)
        seen[base] = repeat + 1
        found.append((f"{base}-{repeat}" if repeat else base, len(hashes), title))
    return found


def results_pages() -> dict[str, str]:
    """benchmarks/<slug>.md for each `## ` section of RESULTS.md, its headings one level up,
    and benchmarks/index.md: RESULTS.md's introduction and the list of pages. A link to one of
    RESULTS.md's own headings (`#anchor`, GitHub's) is pointed at the page and heading that
    show it in the guide."""
    text = RESULTS.read_text(encoding="utf-8")
    parts = re.split(r"(?m)^## ", text)
    intro, sections = parts[0], parts[1:]
    pages: dict[str, str] = {}
    listing = []
    for section in sections:
        title = section.splitlines()[0].strip()
        slug = _slug(title)
        if f"benchmarks/{slug}.md" in pages:
            raise ValueError(f"benchmarks/RESULTS.md: two sections make the page {slug}.md")
        body = re.sub(r"(?m)^### ", "## ", section.split("\n", 1)[1])
        pages[f"benchmarks/{slug}.md"] = f"# {title}\n{body}"
        listing.append(f"- [{title}]({slug}.md)")
    intro = re.sub(r"(?m)^# .*$", "# Benchmarks", intro, count=1)
    pages["benchmarks/index.md"] = intro.rstrip() + "\n\n" + "\n".join(listing) + "\n"
    where = results_anchors()

    def relink(link: re.Match[str]) -> str:
        found = where.get(link.group(1))
        return f"]({posixpath.relpath(found, 'benchmarks')})" if found else link.group(0)

    return {uri: re.sub(r"\]\(#([^)\s]+)\)", relink, content) for uri, content in pages.items()}


def results_anchors() -> dict[str, str]:
    """GitHub's anchor of each heading of RESULTS.md -> the site's page (and MkDocs' anchor)
    that shows it, from the site's root."""
    where: dict[str, str] = {}
    page = "benchmarks/index.md"
    for anchor, level, title in _github_anchors(RESULTS.read_text(encoding="utf-8")):
        if level <= 2:
            page = f"benchmarks/{_slug(title)}.md" if level == 2 else page
            where[anchor] = page
        else:  # MkDocs' own anchor for the heading (its toc extension's)
            where[anchor] = f"{page}#{slugify(title.replace('`', ''), '-')}"
    return where


# ---- links: as GitHub reads them in the source, as the site serves them --------------------

LINK = re.compile(r"(\]\()([^)\s#]*)(#[^)\s]*)?(\))")


def site_path(repo_path: str, anchor: str = "") -> str | None:
    """The site's page (from its root, with the anchor) that shows a file of the repository,
    or None for a file the site does not show."""
    if repo_path == "README.md":
        return "index.md" + anchor
    if repo_path.startswith("docs/"):
        return repo_path.removeprefix("docs/") + anchor
    if repo_path == "benchmarks/RESULTS.md":
        return results_anchors().get(anchor[1:], "benchmarks/index.md") if anchor else "benchmarks/index.md"
    if re.fullmatch(r"benchmarks/[\w.-]+\.png", repo_path):
        return repo_path  # on_files copies them
    return None


def site_links(markdown: str, source: str, page: str) -> str:
    """A page's relative links, written from its source file in the repository (`source`),
    pointed at the site's pages from the page's own place in the site (`page`)."""

    def relink(link: re.Match[str]) -> str:
        target, anchor = link.group(2), link.group(3) or ""
        if not target or re.match(r"[a-z]+:", target):
            return link.group(0)  # an anchor on the same page, or a URL
        repo_path = posixpath.normpath(posixpath.join(posixpath.dirname(source), target))
        found = site_path(repo_path, anchor)
        if found is None:
            raise ValueError(f"{source}: the link to {target} points at a file the site does not show")
        path, _, hash_ = found.partition("#")
        relative = posixpath.relpath(path, posixpath.dirname(page) or ".")
        return f"{link.group(1)}{relative}{'#' + hash_ if hash_ else ''}{link.group(4)}"

    return LINK.sub(relink, markdown)


# ---- hooks ---------------------------------------------------------------------------------


def on_files(files: Files, *, config: MkDocsConfig) -> Files:
    files.append(File.generated(config, "index.md", content=README.read_text(encoding="utf-8")))
    for uri, content in results_pages().items():
        files.append(File.generated(config, uri, content=content))
    for image in sorted((REPO / "benchmarks").glob("*.png")):
        files.append(File.generated(config, f"benchmarks/{image.name}", abs_src_path=str(image)))
    return files


def on_page_markdown(markdown: str, *, page: Page, config: MkDocsConfig, files: Files) -> str:
    uri = page.file.src_uri
    if uri == "index.md":
        return site_links(markdown, "README.md", uri)
    if uri == "reference/space.md":
        markdown = markdown.replace(SPACE_REFERENCE_MARK, space_reference())
    if uri.startswith("benchmarks/"):
        return markdown  # generated with the site's links
    return site_links(markdown, f"docs/{uri}", uri)


def on_page_content(html: str, *, page: Page, config: MkDocsConfig, files: Files) -> str:
    # mkdocs-typer2 leaves the page empty, silently, when `typer ... utils docs` fails.
    if page.file.src_uri == "reference/cli.md" and "nas search" not in html:
        log.warning("reference/cli.md: the command line reference came out empty (is `typer` on PATH?)")
    return html


def on_nav(nav: Navigation, *, config: MkDocsConfig, files: Files) -> Navigation:
    listed = {page.file.src_uri for page in nav.pages}
    for uri in sorted(results_pages()):
        if uri not in listed:
            log.warning(f"benchmarks/RESULTS.md's page {uri} is not in mkdocs.yml's nav: add it")
    return nav

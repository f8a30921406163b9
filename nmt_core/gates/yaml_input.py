"""YAML written by users (sweep spaces, trial configs, `--set` values), read at a bounded cost.

PyYAML's safe loader still shares aliased nodes (a 430-byte "billion laughs" costs gigabytes once copied or
printed), lets a duplicate key silently win (or a merge key `<<` restate one), reads `.nan` and `.inf` as numbers
and takes any file size. Here
each of those is refused in one line naming the file and, where there is one, the dotted key, before anything
is expanded: an alias or anchor, or nesting deeper than MAX_DEPTH, is refused at the parser's event for it.
PyYAML is imported by the functions that parse, not with the module: `sweeper --help` reads the settings' declarations,
which import this module, and parses no YAML.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

# the gate's bounds and display (nmt_core/gates/gate.py), named here too for the modules that read YAML
from nmt_core.gates.gate import MAX_BYTES, MAX_DEPTH, SHOWN_CHARS, ErrorType, read_regular, shown  # noqa: F401

if TYPE_CHECKING:
    import yaml

# MAX_DEPTH: libyaml's parser slows down quadratically with deep flow nesting
MERGE_TAG = "tag:yaml.org,2002:merge"  # what the resolver makes of a plain `<<` key


def read_text(path: str, error: ErrorType) -> str:
    """A UTF-8 regular file of at most MAX_BYTES (the gate's read: no FIFO or device, refused before it is read)."""
    body = read_regular(path, MAX_BYTES, error)
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as err:
        line = body[: err.start].count(b"\n") + 1
        raise error("(file)", f"not UTF-8 (undecodable byte on line {line})", path) from None


def loader_class() -> type:
    """libyaml's safe loader when PyYAML was built with it, else PyYAML's own."""
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse_yaml(text: str, source: str, error: ErrorType) -> Any:
    """One YAML document, checked event by event, then node by node, then value by value."""
    import yaml

    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # text from Python (a surrogate no file decodes to)
            raise error("(file)", f"not UTF-8 text (got {shown(text)})", source) from None
    try:
        _check_events(text, source, error)
        loader = loader_class()(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            _check_keys(node, "", source, error)
            value = _construct(loader, node, source, error)
        finally:
            loader.dispose()
    except yaml.YAMLError as err:
        raise error("(file)", f"not valid YAML: {_problem(err)}", source) from None
    _check_finite(value, "", source, error)
    return value


def _construct(loader: Any, node: yaml.Node, source: str, error: ErrorType) -> Any:
    """The node's Python value; a scalar Python refuses to convert (an integer of over 4,300 digits) is one line."""
    try:
        return loader.construct_document(node)
    except ValueError as err:
        raise error("(file)", f"not a usable value: {str(err).split(':')[0][: 2 * SHOWN_CHARS]}", source) from None


def _problem(err: yaml.YAMLError) -> str:
    """The parser's complaint and where, in one short line."""
    mark = getattr(err, "problem_mark", None)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
    return f"{getattr(err, 'problem', None) or str(err).splitlines()[0]}{where}"[: 2 * SHOWN_CHARS]


def load_yaml_file(path: str, error: ErrorType) -> Any:
    return parse_yaml(read_text(path, error), path, error)


def _check_events(text: str, source: str, error: ErrorType) -> None:
    """Refuse aliases, anchors and deep nesting at the parser's event, before any node exists."""
    import yaml

    depth = 0
    for event in yaml.parse(text, Loader=loader_class()):
        line = event.start_mark.line + 1
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise error(
                "(file)",
                f"YAML anchors and aliases (&name, *name) are not allowed (line {line}): write the values out",
                source,
            )
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                raise error("(file)", f"nested deeper than {MAX_DEPTH} levels (line {line})", source)
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            depth -= 1


def _check_keys(node: yaml.Node, path: str, source: str, error: ErrorType) -> None:
    """A key written twice in one mapping is refused (YAML's loaders let the last one silently win), and so is a
    merge key (`<<: {...}`), which restates keys of the mapping it sits in without being a duplicate."""
    import yaml

    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else f"(line {key.start_mark.line + 1})"
            dotted = f"{path}{name}"
            line = key.start_mark.line + 1
            if key.tag == MERGE_TAG:
                raise error(dotted, f"YAML merge keys (<<) are not allowed (line {line}): write the keys out", source)
            if name in seen:
                where = f"twice on line {line}" if seen[name] == line else f"on lines {seen[name]} and {line}"
                raise error(dotted, f"duplicate key, {where}: a mapping names each key once", source)
            seen[name] = line
            _check_keys(value, dotted + ".", source, error)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _check_keys(item, f"{path}{index}.", source, error)


def _check_finite(value: Any, path: str, source: str, error: ErrorType) -> None:
    """NaN and infinities are refused wherever a number is taken: no range check can hold them."""
    if isinstance(value, float) and not math.isfinite(value):
        raise error(path.rstrip(".") or "(file)", f"must be a finite number (got {value})", source)
    if isinstance(value, dict):
        for key, item in value.items():
            _check_finite(item, f"{path}{key}.", source, error)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_finite(item, f"{path}{index}.", source, error)

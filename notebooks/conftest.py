"""nbval reads a marker comment only when it is exactly `# NBVAL_IGNORE_OUTPUT`; the
series writes `# NBVAL_IGNORE_OUTPUT: <why>`. Accept the reason after a colon."""
import nbval.plugin as _plugin

_find = _plugin.find_comment_markers


def _markers_with_reasons(cellsource):
    lines = []
    for line in cellsource.splitlines():
        s = line.strip()
        if s.startswith("#") and s.lstrip("#").strip().startswith("NBVAL_") and ":" in s:
            line = s.split(":", 1)[0]
        lines.append(line)
    return _find("\n".join(lines))


_plugin.find_comment_markers = _markers_with_reasons

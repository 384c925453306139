"""Reading the params table ``python -m paddle_llrd lr-table`` prints (a line per layer group, over a line
per parameter), for the tests of the command."""
from __future__ import annotations


def parse_lr_table(lines: list[str]) -> tuple[list[list[str]], list[str]]:
    """The rows of the params table, ``[structured name, group, ratio, effective lr, decayed, weight decay]``
    (a group's line gives the group and the prefix of the names under it), and the lines after the table."""
    assert lines[0].split() == ["group:", "prefix", "/", "name", "ratio", "effective", "lr", "decayed", "weight",
                                "decay"]
    rows, index = [], 1
    while index < len(lines) and (lines[index].startswith("  ") or lines[index].split()[0].endswith(":")):
        line = lines[index]
        if line.startswith("  "):
            name, *values = line.split()
            rows.append([prefix + name, group, *values])
        else:
            group, _, prefix = line.partition(": ")
            group = group.rstrip(":")
        index += 1
    return rows, lines[index:]


def group_layer_id(group: str, n_layers: int) -> int:
    """The layer id (0 embeddings, ``i + 1`` block ``i``, ``n_layers + 1`` the top) a group's name stands for."""
    if group.startswith("embeddings"):
        return 0
    if group.startswith("layer_"):
        return int(group[len("layer_"):]) + 1
    return n_layers + 1

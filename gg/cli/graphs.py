"""``gg flights --graph F``: the graph F belongs to, drawn as a tree from its roots down to
the flights that run after them, each with its stage (docs/work-graphs.md)."""

from __future__ import annotations

from gg.cli.context import client, console, emit_json, state


def show_graph(flight_id: str, json_: bool) -> None:
    graph = client().graph(flight_id)
    if json_:
        emit_json(graph)
        return
    console().print(drawing(graph))


def drawing(graph):
    """A rich Tree: each root a branch, each flight's dependents under it; a flight with
    several dependencies is drawn in full once, then named with ``(above)``."""
    from rich.text import Text
    from rich.tree import Tree

    nodes = {n.id: n for n in graph.nodes}
    top = Tree(Text(f"graph of {graph.flight}: {len(nodes)} flights"
                    + (" (more not shown)" if graph.truncated else "")))
    parents = [top]
    for line in graph.lines:
        node = nodes[line.id]
        label = Text(node.title or node.id, style="bold" if node.id == graph.flight else "")
        label.append(f"  {node.id}  ")
        label.append_text(state(node.stage))
        if line.repeated:
            label.append("  (above)", style="dim")
        elif node.ended_reason and node.stage != "landed":
            label.append(f"  {node.ended_reason}", style="dim")
        if node.after_any and not line.repeated:
            label.append("  (after any ending)", style="dim")
        del parents[line.depth + 1:]
        branch = parents[line.depth].add(label)
        parents.append(branch)
    return top

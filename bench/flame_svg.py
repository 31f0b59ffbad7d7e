"""A small flame graph (SVG) from py-spy's collapsed stacks (`--format raw`), of the event
loop's busy samples only: py-spy's own graph of a broker sampled with `--native` is
mostly its idle threads and the loop's wait in epoll, and weighs 50-60 KB.

    python bench/flame_svg.py STACKS.txt OUT.svg "title"

Kept: the stacks of the thread running the event loop (`run_forever`) that are not in
the selector's wait. Frames narrower than 0.5% of the samples are dropped, file paths are
cut to the file's name (native frames without a symbol are named by their library, one
box for a run of them), and the thread's outer frames (runpy, main, the loop's run) are
folded away, so the graph starts at the callbacks the loop runs.
"""

from __future__ import annotations

import html
import re
import sys
import zlib
from pathlib import Path

WIDTH = 1200
ROW = 16
MIN_SHARE = 0.005
_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")
_OUTER = ("BaseEventLoop._run_once", "BaseEventLoop.run_forever")


def _short(frame: str) -> str:
    m = _FRAME.match(frame.strip())
    if not m:
        return frame.strip()
    where = m["file"].rsplit("/", 1)[-1]
    if m["func"].startswith("0x"):  # a native frame without a symbol: its library's
        return f"[{where}]"
    return f"{m['func']} ({where})"


def busy_stacks(raw: str) -> dict[tuple[str, ...], int]:
    """The event loop's busy stacks, below its `_run_once`, with their sample counts."""
    stacks: dict[tuple[str, ...], int] = {}
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [_short(f) for f in stack.split(";")]
        if not any(f.startswith("BaseEventLoop.run_forever") for f in frames):
            continue  # another thread
        if any(f.startswith(("EpollSelector.select", "LoopIdle._wrap")) for f in frames):
            continue  # waiting for the network
        cut = max(i for i, f in enumerate(frames) if f.startswith(_OUTER))
        inner = frames[cut + 1:]
        # a library's unnamed frames in a row are one box
        key = tuple(f for i, f in enumerate(inner) if not (i and f == inner[i - 1]
                                                          and f.startswith("[")))
        key = key or ("(the loop itself)",)
        stacks[key] = stacks.get(key, 0) + int(count)
    return stacks


def render(stacks: dict[tuple[str, ...], int], title: str) -> str:
    total = sum(stacks.values())
    tree: dict[str, object] = {}
    for frames, n in stacks.items():  # a trie of frames with counts at "#"
        node = tree
        for frame in frames:
            node = node.setdefault(frame, {"#": 0})  # type: ignore[assignment]
            node["#"] += n  # type: ignore[operator]
    boxes: list[str] = []
    depth_seen = [0]

    def draw(node: dict[str, object], x: float, depth: int) -> None:
        for frame, child in sorted(node.items()):
            if frame == "#":
                continue
            n = child["#"]  # type: ignore[index]
            width = WIDTH * n / total
            if n / total >= MIN_SHARE:
                depth_seen[0] = max(depth_seen[0], depth)
                y = depth * ROW
                hue = 20 + zlib.crc32(frame.encode()) % 40  # warm colours, stable per frame
                label = frame if len(frame) * 6.5 < width else frame[: int(width / 6.5)]
                boxes.append(
                    f'<g><title>{html.escape(frame)}: {n} samples, {100 * n / total:.1f}%'
                    f'</title><rect x="{x:.1f}" y="{{Y{y}}}" width="{max(width - 0.5, 0.5):.1f}"'
                    f' height="{ROW - 1}" fill="hsl({hue},85%,60%)"/>'
                    + (f'<text x="{x + 2:.1f}" y="{{T{y}}}">{html.escape(label)}</text>'
                       if len(label) > 2 else "") + "</g>")
                draw(child, x, depth + 1)  # type: ignore[arg-type]
            x += width

    draw(tree, 0.0, 0)
    height = (depth_seen[0] + 1) * ROW + 30
    body = "\n".join(boxes)
    # flame graphs grow upwards: depth 0 at the bottom
    for depth in range(depth_seen[0] + 1):
        y = height - (depth + 1) * ROW
        body = body.replace(f"{{Y{depth * ROW}}}", str(y)).replace(f"{{T{depth * ROW}}}",
                                                                    str(y + ROW - 4))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
            f'font-family="monospace" font-size="11">\n'
            f'<text x="4" y="14" font-size="13">{html.escape(title)} ({total} busy samples of '
            f'the event loop; hover for a frame\'s share)</text>\n{body}\n</svg>\n')


def main() -> int:
    raw, out, title = Path(sys.argv[1]).read_text(), Path(sys.argv[2]), sys.argv[3]
    out.write_text(render(busy_stacks(raw), title))
    return 0


if __name__ == "__main__":
    sys.exit(main())

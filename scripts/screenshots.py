"""Regenerate the pictures in docs/img/ and the outputs stored in docs/tour.ipynb.

    python scripts/screenshots.py            # everything
    python scripts/screenshots.py report     # one of: report, graph, notebook

* ``report``: ``adjoint solve problems/slinear.yaml`` as a terminal shows it, exported by
  rich as SVG (docs/img/report.svg) and converted to PNG with ``rsvg-convert`` (Debian
  ``librsvg2-bin``);
* ``graph``: ``adjoint graph problems/slinear.yaml --variant legacy`` (and ``full``) as SVG
  and PNG (needs Graphviz);
* ``notebook``: docs/tour.ipynb executed in a Jupyter kernel (nbclient), its outputs stored
  in the notebook, and its first cells drawn as a page and photographed by headless
  Chromium (Debian ``chromium``) into docs/img/notebook.png.

Not part of the test suite: the tools are only needed to refresh the pictures.
"""

from __future__ import annotations

import html
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
IMG = os.path.join(ROOT, "docs", "img")
SLINEAR = os.path.join(ROOT, "problems", "slinear.yaml")
NOTEBOOK = os.path.join(ROOT, "docs", "tour.ipynb")


def need(tool: str, package: str) -> str:
    path = shutil.which(tool)
    if path is None:
        sys.exit(f"screenshots: {tool} is needed (apt-get install {package})")
    return path


def svg_to_png(svg_path: str, png_path: str, width: int | None = None) -> None:
    cmd = [need("rsvg-convert", "librsvg2-bin"), "-o", png_path]
    if width:
        cmd += ["-w", str(width)]
    subprocess.run(cmd + [svg_path], check=True)


def report() -> None:
    import adjoint
    from adjoint.render.console import svg

    pred = adjoint.load(SLINEAR).solve()
    text = svg(pred, width=96, title="adjoint solve problems/slinear.yaml")
    # rich's SVG asks for the Fira Code web font; a converter without it needs a local
    # monospace font and literal spaces to keep the columns
    text = text.replace("<svg ", '<svg xml:space="preserve" ', 1).replace("&#160;", " ")
    text = text.replace('"Fira Code"', '"DejaVu Sans Mono"').replace("Fira Code,", "DejaVu Sans Mono,")
    out = os.path.join(IMG, "report.svg")
    with open(out, "w", encoding="utf-8") as fh:
        fh.write(text)
    svg_to_png(out, os.path.join(IMG, "report.png"))


def graph() -> None:
    import adjoint

    pred = adjoint.load(SLINEAR).solve()
    for variant in ("legacy", "full"):
        pic = pred[variant].graph()
        with open(os.path.join(IMG, f"graph-{variant}.svg"), "wb") as fh:
            fh.write(pic.render("svg"))
        with open(os.path.join(IMG, f"graph-{variant}.png"), "wb") as fh:
            fh.write(pic.render("png"))


def notebook() -> None:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(NOTEBOOK, as_version=4)
    os.environ["PYTHONPATH"] = ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": os.path.dirname(NOTEBOOK)}}).execute()
    for cell in nb.cells:                      # no machine-specific metadata in the stored notebook
        cell.metadata.pop("execution", None)
    nbformat.write(nb, NOTEBOOK)
    code = [c for c in nb.cells if c.cell_type == "code"]
    cells = []
    for i, c in enumerate(code[:2], 1):
        out = next(o for o in c.outputs if o.output_type == "execute_result")
        cells.append(f'<div class="cell"><div class="in"><span class="prompt">In [{i}]:</span><pre>'
                     f'{html.escape(c.source)}</pre></div><div class="out"><span class="prompt">Out[{i}]:</span>'
                     f'<div class="res">{out.data["text/html"]}</div></div></div>')
    page = ("<html><head><meta charset='utf-8'><style>body{margin:16px;background:#fff;font-family:sans-serif}"
            ".cell{margin-bottom:18px}.in,.out{display:flex;gap:10px}.prompt{color:#303f9f;font-family:monospace;"
            "min-width:70px;padding-top:6px}.out .prompt{color:#d84315}pre{background:#f5f5f5;border:1px solid #e0e0e0;"
            "padding:6px 10px;margin:0;flex:1;font-size:13px}.res{flex:1;font-size:14px}</style></head><body>"
            + "".join(cells) + "</body></html>")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or need("chromium", "chromium")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cell.html")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(page)
        shot = os.path.join(tmp, "shot.png")
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--screenshot={shot}", "--window-size=1100,1500", f"file://{path}"], check=True,
                       capture_output=True, timeout=120)
        shutil.copy(shot, os.path.join(IMG, "notebook.png"))


def main(argv: list[str]) -> None:
    jobs = {"report": report, "graph": graph, "notebook": notebook}
    chosen = argv or list(jobs)
    os.makedirs(IMG, exist_ok=True)
    for name in chosen:
        if name not in jobs:
            sys.exit(f"screenshots: unknown picture {name!r}; choose from {', '.join(jobs)}")
        jobs[name]()
        print(f"screenshots: {name} done")


if __name__ == "__main__":
    main(sys.argv[1:])

"""Make the report pictures in docs/ (not a test; needs Chromium and playwright).

    python docs/scripts/make_report_examples.py

From the real two-GPU H200 run ``data/traces/h200x2_bursts.parquet`` with the SGLang-format log
its workload wrote and its ground-truth labels, plus a **synthetic** expert-distribution count
of Kimi K2.6's shape ([10 passes, 61 layers, 384 experts]; Dirichlet(0.3)-skewed routing,
seed 0, layer 0 dense) laid out at TP8 / EP8:

- ``report_pdf_page1.png`` and ``report_pdf_page3.png``: pages 1 and 3 of the PDF;
- ``report_html.png``: the top of the HTML in a 1280-px browser window.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pypdfium2 as pdfium
from playwright.sync_api import sync_playwright

from tealeaves.app.report.model import build_report, from_trace
from tealeaves.app.report.out import report_bytes
from tealeaves.classifier.align import align_events
from tealeaves.data.server_log import events_frame, read_log

DOCS = Path(__file__).resolve().parents[1]
TRACES = DOCS.parent / "data" / "traces"


def synthetic_counts(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    share = rng.dirichlet(np.full(384, 0.3), size=61)
    count = np.stack([rng.poisson(share * 4096 * 8) for _ in range(10)]).astype(float)
    count[:, 0] = 0.0
    return count


def main() -> None:
    inp = from_trace(TRACES / "h200x2_bursts.parquet")
    log = read_log(TRACES / "h200x2_bursts.sglang.log")
    events, _ = align_events(log.events, inp.samples)  # shifted when the offset is confident
    inp.server_events = events_frame(events)
    rep = build_report(inp, labels=TRACES / "h200x2_bursts.labels.csv",
                       experts=synthetic_counts(), n_gpus=8, ep_size=8)
    with tempfile.TemporaryDirectory() as tmp:
        pdf_path = Path(tmp) / "r.pdf"
        pdf_path.write_bytes(report_bytes(rep, "pdf"))
        pdf = pdfium.PdfDocument(str(pdf_path))
        for i in (0, 2):
            pdf[i].render(scale=1.4).to_pil().save(DOCS / f"report_pdf_page{i + 1}.png")
        pdf.close()
        html = Path(tmp) / "r.html"
        html.write_bytes(report_bytes(rep, "html"))
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path="/usr/bin/chromium",
                                  args=["--no-sandbox", "--headless", "--disable-gpu"])
            page = b.new_page(viewport={"width": 1280, "height": 900})
            page.goto(html.as_uri())
            page.wait_for_function("() => window.Plotly && document.querySelector("
                                   "'.plotly-graph-div')._fullLayout")
            page.wait_for_timeout(1000)
            page.screenshot(path=str(DOCS / "report_html.png"))
            b.close()


if __name__ == "__main__":
    main()

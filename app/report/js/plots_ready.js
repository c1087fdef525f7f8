// True once plotly.js has drawn every plot of the report page (app/report/render.py waits on it
// before printing the PDF or taking the PNG).
() => window.Plotly &&
    Array.from(document.querySelectorAll(".plotly-graph-div")).every((d) => d._fullLayout)

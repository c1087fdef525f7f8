// Installed in the benchmarked page (app/bench/dashboard.py): every redraw of the live figure
// records (browser clock ms, x of the newest point of trace `lane`).
(lane) => {
    window.__paints = [];
    const gd = document.querySelector("#tl-graph .js-plotly-plot");
    gd.on("plotly_afterplot", () => {
        const x = gd._fullData[lane].x;
        if (x && x.length) window.__paints.push([Date.now(), x[x.length - 1]]);
    });
}

// True once the live figure's trace `lane` has points (the first page is drawn).
(lane) => {
    const gd = document.querySelector("#tl-graph .js-plotly-plot");
    return gd && gd._fullData && gd._fullData[lane]._length > 0;
}

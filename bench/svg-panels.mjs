// SVG line charts for the benches' plots (docs/images): panels of series of [x, y] points, laid
// out in a grid, drawn from the benches' JSON by bench/scale-plot.mjs and bench/cost-plot.mjs.
const colors = ['#d1495b', '#00798c', '#edae49', '#30638e', '#6a4c93'];

const panelW = 420;
const panelH = 260;
const margin = { left: 58, right: 16, top: 34, bottom: 42 };

/** One panel: series of [x, y] points, x on a log scale when `logX`. */
export function panel({ title, xLabel, yLabel, series, logX }) {
  const points = series.flatMap((s) => s.points);
  if (points.length === 0) return `<text x="${margin.left}" y="${panelH / 2}">${title}: no data</text>`;
  const fx = logX ? Math.log10 : (v) => v;
  const xs = points.map(([x]) => fx(x));
  const [x0, x1] = [Math.min(...xs), Math.max(...xs) === Math.min(...xs) ? Math.min(...xs) + 1 : Math.max(...xs)];
  const y1 = Math.max(...points.map(([, y]) => y)) * 1.1 || 1;
  const w = panelW - margin.left - margin.right;
  const h = panelH - margin.top - margin.bottom;
  const px = (x) => margin.left + ((fx(x) - x0) / (x1 - x0)) * w;
  const py = (y) => margin.top + h - (y / y1) * h;
  const ticksX = logX ? [...new Set(points.map(([x]) => x))].sort((a, b) => a - b) : [...new Set(points.map(([x]) => x))];
  const ticksY = [0, 0.25, 0.5, 0.75, 1].map((f) => f * y1);
  const fmt = (v) => (v >= 1000 ? `${Math.round(v / 100) / 10}k` : v >= 10 ? String(Math.round(v)) : v.toFixed(1));
  const parts = [
    `<text x="${margin.left}" y="20" font-weight="bold">${title}</text>`,
    `<line x1="${margin.left}" y1="${margin.top + h}" x2="${margin.left + w}" y2="${margin.top + h}" stroke="#888"/>`,
    `<line x1="${margin.left}" y1="${margin.top}" x2="${margin.left}" y2="${margin.top + h}" stroke="#888"/>`,
    ...ticksX.map((x) => `<text x="${px(x)}" y="${margin.top + h + 16}" text-anchor="middle">${fmt(x)}</text>`),
    ...ticksY.map(
      (y) =>
        `<text x="${margin.left - 6}" y="${py(y) + 4}" text-anchor="end">${fmt(y)}</text><line x1="${margin.left}" y1="${py(y)}" x2="${margin.left + w}" y2="${py(y)}" stroke="#eee"/>`,
    ),
    `<text x="${margin.left + w / 2}" y="${panelH - 6}" text-anchor="middle">${xLabel}</text>`,
    `<text transform="translate(14 ${margin.top + h / 2}) rotate(-90)" text-anchor="middle">${yLabel}</text>`,
  ];
  series.forEach((s, i) => {
    const color = colors[(s.run ?? i) % colors.length];
    const path = s.points.map(([x, y], j) => `${j ? 'L' : 'M'}${px(x).toFixed(1)},${py(y).toFixed(1)}`).join(' ');
    parts.push(`<path d="${path}" fill="none" stroke="${color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="5 4"' : ''}/>`);
    for (const [x, y] of s.points) parts.push(`<circle cx="${px(x).toFixed(1)}" cy="${py(y).toFixed(1)}" r="3" fill="${color}"/>`);
    parts.push(
      `<line x1="${margin.left + 10}" y1="${margin.top + 8 + i * 16}" x2="${margin.left + 30}" y2="${margin.top + 8 + i * 16}" stroke="${color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="5 4"' : ''}/><text x="${margin.left + 36}" y="${margin.top + 12 + i * 16}">${s.label}</text>`,
    );
  });
  return parts.join('\n');
}

/** An SVG document of `panels` (each as `panel` takes it) in rows of `columns`. */
export function svgDocument(title, panels, columns = 2) {
  const rows = Math.ceil(panels.length / columns);
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${panelW * columns}" height="${panelH * rows}" font-family="sans-serif" font-size="11">`,
    `<title>${title}</title>`,
    '<rect width="100%" height="100%" fill="white"/>',
    ...panels.map((p, i) => `<g transform="translate(${(i % columns) * panelW} ${Math.floor(i / columns) * panelH})">${panel(p)}</g>`),
    '</svg>',
    '',
  ].join('\n');
}

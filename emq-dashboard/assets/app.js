// emq dashboard: plain JavaScript, no build step, no dependencies.
//
// One view per hash route (#/overview, #/queues, #/queue/<name>, #/workers, #/jobs,
// #/job/<msgid>, #/workflow/<id>, #/batch/<id>, #/dead, #/schedules). A view builds its controls once and
// renders its data into its own containers; every two seconds the current
// view reloads its data (skipped while the tab is hidden or a dialog is
// open). All text from the router goes through text nodes, never HTML.
// State changes are POSTs with the X-EMQ-Request header (see /api docs).
'use strict';

const POLL_MS = 2000;
const PAGE = 50;

// ---------------------------------------------------------------- helpers

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

const SVG = 'http://www.w3.org/2000/svg';
function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  for (const c of children) el.append(c instanceof Node ? c : String(c));
  return el;
}

const nf = new Intl.NumberFormat('en-US');
function num(n) { return n === undefined || n === null ? '–' : nf.format(n); }
function rate(r) {
  if (r === null || r === undefined || !isFinite(r)) return '–';
  if (r >= 100) return nf.format(Math.round(r));
  if (r >= 10) return r.toFixed(1);
  return r.toFixed(r === 0 ? 0 : 2);
}
function dur(ms) {
  if (ms === null || ms === undefined) return '–';
  if (ms < 1000) return Math.round(ms) + ' ms';
  const sec = ms / 1000;
  if (sec < 60) return sec.toFixed(sec < 10 ? 1 : 0) + ' s';
  const min = Math.floor(sec / 60);
  if (min < 60) return min + ' min ' + Math.floor(sec % 60) + ' s';
  const hr = Math.floor(min / 60);
  if (hr < 48) return hr + ' h ' + (min % 60) + ' min';
  return Math.floor(hr / 24) + ' d ' + (hr % 24) + ' h';
}
function stamp(ms) {
  if (!ms) return '–';
  const d = new Date(ms);
  const p = (n, w = 2) => String(n).padStart(w, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ` +
    `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}
// "12 s ago" / "in 3 min", with the exact time as a tooltip.
function when(ms) {
  if (!ms) return h('span', {}, '–');
  const d = Date.now() - ms;
  const text = d >= 0 ? dur(d) + ' ago' : 'in ' + dur(-d);
  return h('span', { title: stamp(ms) }, text);
}
function badge(text, cls) { return h('span', { class: 'badge ' + (cls || text) }, text); }
function short(id) { return id && id.length > 13 ? id.slice(0, 8) + '…' + id.slice(-4) : id; }
// A job's link by its msgid's beginning (the whole one in its title): what
// `emq-cli job PREFIX` takes.
function shortJobLink(msgid) {
  return h('a', { href: '#/job/' + encodeURIComponent(msgid), class: 'mono', title: msgid }, short(msgid));
}
function jobLink(msgid) {
  return h('a', { href: '#/job/' + encodeURIComponent(msgid), class: 'mono', title: msgid }, msgid);
}
function text(v) {
  if (v === undefined || v === null) return '';
  return typeof v === 'string' ? v : JSON.stringify(v, null, 2);
}
function errorText(e) {
  if (!e) return '';
  if (typeof e === 'string') return e;
  if (e.message) return (e.kind ? e.kind + ': ' : '') + e.message;
  return JSON.stringify(e);
}

// A failure (a result {"error": {...}} or the error object) for a person:
// "kind: message", then its traceback as text, without the job manager's
// own runner frames (File "<string>", ... in _run), then a shell job's
// exit status and output.
function failureInner(e) {
  return e && typeof e === 'object' && e.error && typeof e.error === 'object' ? e.error : e;
}
function tracebackText(e) {
  const inner = failureInner(e);
  const tb = inner && typeof inner.traceback === 'string' ? inner.traceback : '';
  return tb.split('\n').filter(l => !l.trim().startsWith('File "<string>"')).join('\n').trimEnd();
}
function failureView(e) {
  const inner = failureInner(e);
  if (!inner || typeof inner !== 'object') return h('pre', { class: 'block error-text-block' }, text(e));
  const tb = tracebackText(e);
  const out = [h('div', { class: 'error-text error-headline', id: 'job-error' }, errorText(inner))];
  if (tb) out.push(h('pre', { class: 'block error-text-block', id: 'job-traceback' }, tb));
  if (inner.exit_status !== undefined && inner.exit_status !== null) out.push(h('div', { class: 'sub' }, 'exit status ' + inner.exit_status));
  for (const k of ['stderr', 'stdout']) {
    if (typeof inner[k] === 'string' && inner[k]) out.push(h('div', { class: 'sub' }, k), h('pre', { class: 'block' }, inner[k]));
  }
  return out;
}

class ApiError extends Error {
  constructor(status, error) {
    super((error && error.message) || 'HTTP ' + status);
    this.status = status;
    this.kind = error && error.kind;
  }
}

// GET /api/<op>?args, or POST with a JSON body and the action header.
async function api(op, args, post) {
  let url = '/api/' + op;
  const opts = { headers: { Accept: 'application/json' }, credentials: 'same-origin' };
  if (post) {
    opts.method = 'POST';
    opts.headers['Content-Type'] = 'application/json';
    opts.headers['X-EMQ-Request'] = '1';
    opts.body = JSON.stringify(args || {});
  } else if (args) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(args)) {
      if (v !== undefined && v !== null && v !== '') q.set(k, v);
    }
    const qs = q.toString();
    if (qs) url += '?' + qs;
  }
  const res = await fetch(url, opts);
  let body = null;
  try { body = await res.json(); } catch (_) { /* not JSON */ }
  if (!body || body.ok !== true) throw new ApiError(res.status, body && body.error);
  return body;
}

function toast(msg, isError) {
  const t = h('div', { class: 'toast' + (isError ? ' error' : ''), role: 'status' }, msg);
  document.getElementById('toasts').append(t);
  setTimeout(() => t.remove(), isError ? 7000 : 3500);
}

// A confirmation dialog; resolves true when confirmed.
function confirmAction(title, message, okLabel) {
  const dlg = document.getElementById('confirm');
  document.getElementById('confirm-title').textContent = title;
  document.getElementById('confirm-text').textContent = message;
  document.getElementById('confirm-ok').textContent = okLabel || 'Confirm';
  dlg.returnValue = '';
  dlg.showModal();
  return new Promise(resolve => {
    dlg.addEventListener('close', () => resolve(dlg.returnValue === 'ok'), { once: true });
  });
}

// Run a state change; toast its outcome and refresh the view.
async function act(op, args, done, confirm) {
  if (state.readOnly) { toast('The dashboard is read-only', true); return; }
  if (confirm && !(await confirmAction(confirm.title, confirm.text, confirm.ok))) return;
  try {
    const r = await api(op, args, true);
    toast(done(r));
  } catch (e) {
    toast(op + ' failed: ' + e.message, true);
  }
  refresh();
}

function actionButton(label, cls, onclick, extra) {
  return h('button', Object.assign({
    class: 'btn small ' + (cls || ''), type: 'button', onclick,
    disabled: state.readOnly, title: state.readOnly ? 'read-only' : undefined,
  }, extra || {}), label);
}

function table(headers, rows, emptyText) {
  const head = h('tr', {}, headers.map(c => {
    const [label, cls] = Array.isArray(c) ? c : [c, ''];
    return h('th', { class: cls }, label);
  }));
  const body = rows.length ? rows :
    [h('tr', {}, h('td', { class: 'empty', colspan: headers.length }, emptyText || 'Nothing here'))];
  return h('div', { class: 'table-wrap' }, h('table', {}, h('thead', {}, head), h('tbody', {}, body)));
}

function card(title, right, ...content) {
  return h('section', { class: 'card' },
    h('header', {}, typeof title === 'string' ? h('h2', {}, title) : title, right || ''),
    ...content);
}

// ---------------------------------------------------------------- state

const state = {
  view: null,        // the current view object
  route: '',
  readOnly: false,
  version: '',
  busy: false,       // a refresh is in progress
};

function setLive(ok, msg) {
  const el = document.getElementById('live');
  el.classList.toggle('ok', ok);
  el.classList.toggle('bad', !ok);
  document.getElementById('live-text').textContent = msg;
}

// ---------------------------------------------------------------- chart

// Rates per second from consecutive samples: {t, accepted, completed, failed}.
function ratesOf(stats) {
  const f = stats.fields || [];
  const idx = name => f.indexOf(name) + 1;
  const S = stats.samples || [];
  const out = [];
  for (let i = 1; i < S.length; i++) {
    const dt = (S[i][0] - S[i - 1][0]) / 1000;
    if (dt <= 0) continue;
    const r = name => Math.max(0, (S[i][idx(name)] - S[i - 1][idx(name)]) / dt);
    // Failed: failed results plus jobs dead-lettered (failed for good).
    out.push({ t: S[i][0], accepted: r('accepted'), completed: r('completed'),
      failed: r('failed') + r('dead_lettered') });
  }
  return out;
}

function niceMax(v) {
  if (v <= 0) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

function drawChart(rates, windowMs) {
  return lineChart(rates, windowMs, [
    { key: 'accepted', color: '#3b82f6', fill: true },
    { key: 'completed', color: '#16a34a', fill: true },
    { key: 'failed', color: '#dc2626' },
  ], { label: 'jobs per second' });
}

// A line chart of `points` ({t, key: value...}) over the last `windowMs`:
// one line per series ({key, color, fill, step}); opts: {label, width and
// height (the viewBox's), small (no axis labels, for the queues page), fmt
// (axis values)}. A `step` series holds each value over the period before
// its point (a run time measured over that period: a lone one still shows). What it drew is on the svg for scripts and tests:
// data-points, data-max-KEY (largest value shown) and, for series with
// `count`, data-count-KEY: the events behind a rate (Σ rate × period).
function lineChart(points, windowMs, series, opts) {
  opts = opts || {};
  const small = !!opts.small;
  const W = opts.width || 1000, H = opts.height || 260, L = small ? 4 : 52, R = small ? 4 : 12, T = small ? 6 : 12, B = small ? 4 : 26;
  const now = Date.now();
  const t0 = now - windowMs;
  const shown = points.filter(r => r.t >= t0);
  const max = niceMax(Math.max(0, ...shown.map(r => Math.max(...series.map(sr => r[sr.key] || 0)))));
  const x = t => L + (W - L - R) * (t - t0) / windowMs;
  const y = v => T + (H - T - B) * (1 - v / max);
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: 'none', role: 'img',
    'aria-label': opts.label || 'chart', class: small ? 'spark' : '' });
  const grid = s('g', { class: 'grid' });
  const axis = s('g', { class: 'axis' });
  const fmt = opts.fmt || (v => max >= 4 ? nf.format(v) : rate(v));
  for (let i = 0; i <= (small ? 2 : 4); i++) {
    const v = max * i / (small ? 2 : 4);
    grid.append(s('line', { x1: L, x2: W - R, y1: y(v), y2: y(v) }));
    if (!small) axis.append(s('text', { x: L - 8, y: y(v) + 4, 'text-anchor': 'end' }, fmt(v)));
  }
  const stepS = windowMs <= 120000 ? 15 : windowMs <= 300000 ? 60 : 120;
  for (let k = 0; !small && k * stepS * 1000 <= windowMs; k++) {
    const t = now - k * stepS * 1000;
    const label = k === 0 ? 'now' : stepS < 60 ? '−' + k * stepS + ' s' : '−' + k * stepS / 60 + ' min';
    axis.append(s('text', { x: x(t), y: H - 6, 'text-anchor': k === 0 ? 'end' : 'middle' }, label));
  }
  svg.append(grid, axis);
  svg.setAttribute('data-points', String(shown.length));
  for (const sr of series) {
    const vals = shown.map(r => r[sr.key]).filter(v => v !== null && v !== undefined);
    svg.setAttribute('data-max-' + sr.key, String(vals.length ? Math.max(...vals) : 0));
    if (sr.count) {
      const n = shown.reduce((a, r) => a + (r['n_' + sr.key] || 0), 0);
      svg.setAttribute('data-count-' + sr.key, String(n));
    }
    // A line through the points that have a value (run times have none
    // in a period where nothing ended): a gap starts a new line.
    let d = '', open = false, first = null, last = null, prevT = null;
    for (const r of shown) {
      const v = r[sr.key];
      const from = prevT;
      prevT = r.t;
      if (v === null || v === undefined) { open = false; continue; }
      if (sr.step && from !== null) {
        d += (open ? 'L' : 'M') + x(from).toFixed(1) + ' ' + y(v).toFixed(1) + ' ';
        open = true;
      }
      d += (open ? 'L' : 'M') + x(r.t).toFixed(1) + ' ' + y(v).toFixed(1) + ' ';
      open = true;
      if (first === null) first = r;
      last = r;
    }
    if (!d) continue;
    if (sr.fill && first && last) {
      const area = d + `L${x(last.t).toFixed(1)} ${y(0)} L${x(first.t).toFixed(1)} ${y(0)} Z`;
      svg.append(s('path', { d: area, fill: sr.color, 'fill-opacity': '0.08', stroke: 'none' }));
    }
    svg.append(s('path', { d: d.trim(), fill: 'none', stroke: sr.color, 'stroke-width': small ? '1.5' : '2',
      'stroke-linejoin': 'round', 'vector-effect': 'non-scaling-stroke', 'data-series': sr.key }));
  }
  if (shown.length < 2) {
    svg.append(s('text', { x: W / 2, y: H / 2 + 4, 'text-anchor': 'middle', fill: '#98a2b3',
      'font-size': small ? '40' : '13' }, 'collecting samples…'));
  }
  return svg;
}

// A queue's samples (GET /api/queue-stats) as chart points: per period,
// the rates per second of submitted (accepted), started, succeeded (done)
// and failed (failed + dead-lettered) jobs with the counts behind them
// (n_KEY), the waiting and running depth, and the run time p50 / p95 in ms
// of the runs that ended in it.
function queuePoints(fields, rows) {
  const at = name => fields.indexOf(name) + 1;
  const out = [];
  for (let i = 1; i < rows.length; i++) {
    const a = rows[i - 1], b = rows[i];
    const dt = (b[0] - a[0]) / 1000;
    if (dt <= 0) continue;
    const n = name => Math.max(0, b[at(name)] - a[at(name)]);
    const ms = name => b[at(name)] === null ? null : b[at(name)] / 1000;
    const p = { t: b[0], waiting: b[at('waiting')], running: b[at('running')],
      p50: ms('run_p50_us'), p95: ms('run_p95_us') };
    const counts = { submitted: n('accepted'), started: n('started'), succeeded: n('done'),
      failed: n('failed') + n('dead_lettered') };
    for (const [k, v] of Object.entries(counts)) { p[k] = v / dt; p['n_' + k] = v; }
    out.push(p);
  }
  return out;
}

const QUEUE_RATES = [
  { key: 'submitted', label: 'submitted', color: '#3b82f6', count: true },
  { key: 'started', label: 'started', color: '#7c3aed', count: true },
  { key: 'succeeded', label: 'succeeded', color: '#16a34a', fill: true, count: true },
  { key: 'failed', label: 'failed', color: '#dc2626', count: true },
];
const QUEUE_DEPTH = [
  { key: 'waiting', label: 'waiting', color: '#d97706', fill: true },
  { key: 'running', label: 'running', color: '#2563eb' },
];
const QUEUE_RUNTIME = [
  { key: 'p50', label: 'p50', color: '#0891b2', step: true },
  { key: 'p95', label: 'p95', color: '#be185d', step: true },
];

function seriesLegend(series, values) {
  return h('div', { class: 'legend series' }, series.map(sr =>
    h('span', { 'data-legend': sr.key, class: 'lg-' + sr.key }, sr.label, h('b', {}, values ? values(sr.key) : ''))));
}

// The window a history fills: one minute at first, `most` at most.
function windowOf(firstMs, most) {
  return Math.min(most, Math.max(60000, Math.ceil((Date.now() - firstMs) / 60000) * 60000));
}

// ---------------------------------------------------------------- views

function stat(label, value, note, cls, key) {
  return h('div', { class: 'stat ' + (cls || '') },
    h('div', { class: 'label' }, label),
    h('div', { class: 'value', 'data-stat': key }, value),
    h('div', { class: 'note' }, note || '\u00a0'));
}

const views = {};

views.overview = {
  title: 'Overview',
  build(root) {
    this.banner = h('div');
    this.stats = h('div', { class: 'stats' });
    this.legend = h('div', { class: 'legend' });
    this.chart = h('div', { class: 'body chart' });
    this.queues = h('div');
    this.workers = h('div');
    root.append(
      h('h1', {}, 'Overview', h('span', { class: 'sub', id: 'version' })),
      this.banner, this.stats,
      card(this.chartTitle = h('h2', {}, 'Jobs per second'), this.legend, this.chart),
      h('div', { class: 'grid2' },
        card('Queues', h('a', { href: '#/queues' }, 'All queues →'), this.queues),
        card('Workers', h('a', { href: '#/workers' }, 'All workers →'), this.workers)));
  },
  async load() {
    const [stats, queues, workers, dead] = await Promise.all([
      api('stats'), api('queues'), api('workers'), api('dead', { limit: 1 })]);
    return { stats, queues: queues.queues, workers: workers.workers, dead: dead.count };
  },
  render({ stats, queues, workers, dead }) {
    const st = stats.status || {};
    const c = st.counters || {};
    const rates = ratesOf(stats);
    const last = rates.length ? rates[rates.length - 1] : null;
    const f = stats.fields || [];
    const lastSample = (stats.samples || []).slice(-1)[0] || [];
    const col = name => lastSample[f.indexOf(name) + 1];
    const credit = workers.reduce((a, w) => a + (w.credit || 0), 0);
    const inflight = workers.reduce((a, w) => a + (w.inflight || 0), 0);
    const journal = st.journal || {};
    const paused = queues.filter(q => q.paused).length;
    document.getElementById('version').textContent = st.version ? 'router ' + st.version : '';

    this.banner.replaceChildren();
    if (journal.state === 'failing') {
      this.banner.append(h('div', { class: 'banner bad' },
        'The journal is failing: new jobs are refused (journal-unavailable). ',
        h('span', { class: 'mono' }, journal.error || '')));
    }
    if (st.shutting_down) this.banner.append(h('div', { class: 'banner' }, 'The router is shutting down.'));
    if (stats.error) this.banner.append(h('div', { class: 'banner' }, 'Sampling STATUS failed: ' + stats.error));

    this.stats.replaceChildren(
      stat('Accepted / s', rate(last && last.accepted), num(c.accepted) + ' total', 'accepted', 'accepted-rate'),
      stat('Completed / s', rate(last && last.completed), num(c.completed) + ' total (done + failed)', 'completed', 'completed-rate'),
      stat('Failed / s', rate(last && last.failed), num((c.failed || 0) + (c.dead_lettered || 0)) + ' total (failed + dead)', 'failed', 'failed-rate'),
      stat('Queued', num(col('queued')), num(col('retry_waiting')) + ' waiting to retry', '', 'queued'),
      stat('In flight', num(col('inflight')), paused ? paused + ' queue(s) paused' : num(queues.length) + ' queue(s)', '', 'inflight'),
      stat('Workers', num(workers.length), num(inflight) + ' in flight · ' + num(credit) + ' credit', workers.length ? '' : 'warn', 'workers'),
      stat('Dead letters', num(dead), h('a', { href: '#/dead' }, 'inspect →'), dead ? 'bad' : '', 'dead'),
      stat('Journal', journal.state || '–', journal.state === 'ok' ? num(journal.held_sends) + ' held send(s)' :
        journal.state === 'off' ? 'memory only' : num(journal.refused) + ' refused', journal.state === 'failing' ? 'bad' : '', 'journal'));
    // The completed total, for scripts and tests.
    this.stats.dataset.completed = c.completed || 0;

    this.legend.replaceChildren(
      h('span', { class: 'accepted' }, 'accepted', h('b', {}, rate(last && last.accepted))),
      h('span', { class: 'completed' }, 'completed', h('b', {}, rate(last && last.completed))),
      h('span', { class: 'failed' }, 'failed', h('b', {}, rate(last && last.failed))));
    // The window grows with the history: one minute at first, ten at most.
    const first = (stats.samples || [[Date.now()]])[0][0];
    const windowMs = Math.min(600000, Math.max(60000, Math.ceil((Date.now() - first) / 60000) * 60000));
    this.chartTitle.textContent = 'Jobs per second · last ' + windowMs / 60000 + ' min';
    this.chart.replaceChildren(drawChart(rates, windowMs));

    const topQ = [...queues].sort((a, b) => (b.depth + b.inflight) - (a.depth + a.inflight)).slice(0, 8);
    this.queues.replaceChildren(table(
      ['Queue', ['Depth', 'num'], ['In flight', 'num'], ['Oldest', 'num'], ''],
      topQ.map(q => h('tr', {},
        h('td', {}, h('a', { href: '#/queue/' + encodeURIComponent(q.name) }, q.name)), h('td', { class: 'num' }, num(q.depth)), h('td', { class: 'num' }, num(q.inflight)),
        h('td', { class: 'num' }, q.oldest_age_ms ? dur(q.oldest_age_ms) : '–'),
        h('td', { class: 'actions' }, q.paused ? badge('paused') : ''))),
      'No queues yet'));
    const topW = workers.slice(0, 8);
    this.workers.replaceChildren(table(
      ['Worker', 'Queues', ['In flight', 'num'], ['Credit', 'num'], ''],
      topW.map(w => h('tr', {},
        w.name ? h('td', { title: w.identity }, w.name) : h('td', { class: 'mono', title: w.identity }, short(w.identity)),
        h('td', {}, (w.queues || []).map(q => q[1]).join(', ')),
        h('td', { class: 'num' }, num(w.inflight)), h('td', { class: 'num' }, num(w.credit)),
        h('td', { class: 'actions' }, w.draining ? badge('draining') : ''))),
      'No job manager connected'));
  },
};

// The queues page: each queue's last five minutes as small charts (jobs
// per second, waiting and running, run time), then every queue's counts.
const SPARK_MS = 300000;
views.queues = {
  title: 'Queues',
  build(root) {
    this.sparks = h('div', { class: 'spark-grid', id: 'queue-sparks' });
    this.body = h('div');
    root.append(h('h1', {}, 'Queues'),
      // The lines' colours: the top chart is jobs per second, the bottom one
      // waiting and running.
      card(this.sparkTitle = h('h2', {}, 'Last minutes'), seriesLegend(QUEUE_RATES.concat(QUEUE_DEPTH)), this.sparks),
      card('Every queue', '', this.body));
  },
  async load() {
    const [queues, hist] = await Promise.all([api('queues'), api('queue-stats', { last: SPARK_MS / POLL_MS + 1 })]);
    return { queues: queues.queues, hist };
  },
  render({ queues, hist }) {
    const rowsOf = name => (hist.queues || {})[name] || [];
    const firsts = queues.map(q => rowsOf(q.name)).filter(r => r.length).map(r => r[0][0]);
    const windowMs = windowOf(firsts.length ? Math.min(...firsts) : Date.now(), SPARK_MS);
    this.sparkTitle.textContent = 'Last ' + windowMs / 60000 + ' min';
    this.sparks.replaceChildren(...queues.map(q => {
      const pts = queuePoints(hist.fields || [], rowsOf(q.name)).filter(p => p.t >= Date.now() - windowMs);
      const total = k => pts.reduce((a, p) => a + p['n_' + k], 0);
      const p95s = pts.map(p => p.p95).filter(v => v !== null);
      return h('div', { class: 'spark-card', 'data-spark-queue': q.name },
        h('div', { class: 'spark-head' }, h('a', { href: '#/queue/' + encodeURIComponent(q.name) }, q.name),
          q.paused ? badge('paused') : ''),
        h('div', { class: 'spark-note' },
          h('span', { class: 'lg-succeeded' }, num(total('succeeded')) + ' ok'), ' · ',
          h('span', { class: 'lg-failed' }, num(total('failed')) + ' failed'), ' · ',
          h('span', { class: 'lg-waiting' }, num(q.depth + q.retry_waiting + q.delayed) + ' waiting'), ' · ',
          h('span', {}, num(q.inflight) + ' running')),
        h('div', { class: 'spark', 'data-chart': 'rates' }, lineChart(pts, windowMs, QUEUE_RATES, { small: true, height: 120, label: q.name + ' jobs per second' })),
        h('div', { class: 'spark', 'data-chart': 'depth' }, lineChart(pts, windowMs, QUEUE_DEPTH, { small: true, height: 120, label: q.name + ' waiting and running' })),
        h('div', { class: 'spark-note' }, 'run time p95 ', h('b', {}, p95s.length ? dur(p95s[p95s.length - 1]) : '–'),
          p95s.length ? h('span', { class: 'sub' }, ' · max ' + dur(Math.max(...p95s))) : ''));
    }));
    if (!queues.length) this.sparks.replaceChildren(h('div', { class: 'empty' }, 'No queues yet'));
    this.body.replaceChildren(table(
      ['Queue', ['Depth', 'num'], ['In flight', 'num'], ['Retrying', 'num'], ['Delayed', 'num'],
        ['Oldest job', 'num'], ['Workers', 'num'], ['Finished', 'num'], ['Done', 'num'], ['Failed', 'num'], ['Dead', 'num'], 'State', ''],
      queues.map(q => h('tr', { 'data-queue': q.name },
        h('td', {}, h('a', { href: '#/queue/' + encodeURIComponent(q.name) }, q.name)),
        h('td', { class: 'num', 'data-col': 'depth' }, num(q.depth)),
        h('td', { class: 'num', 'data-col': 'inflight' }, num(q.inflight)),
        h('td', { class: 'num' }, num(q.retry_waiting)),
        h('td', { class: 'num' }, num(q.delayed)),
        h('td', { class: 'num' }, q.oldest_age_ms ? dur(q.oldest_age_ms) : '–'),
        h('td', { class: 'num' }, num(q.workers)),
        h('td', { class: 'num', 'data-col': 'finished' }, num(q.finished)),
        h('td', { class: 'num', 'data-col': 'processed' }, num(q.processed)),
        h('td', { class: 'num', 'data-col': 'failed' }, num(q.failed)),
        h('td', { class: 'num', 'data-col': 'dead' }, num(q.dead_lettered)),
        h('td', { 'data-col': 'state' }, q.paused ? badge('paused') : badge('active')),
        h('td', { class: 'actions' },
          q.paused
            ? actionButton('Resume', '', () => act('resume', { queue: q.name }, () => `Queue ${q.name} resumed`), { 'data-action': 'resume' })
            : actionButton('Pause', '', () => act('pause', { queue: q.name }, () => `Queue ${q.name} paused`), { 'data-action': 'pause' }),
          actionButton('Purge', 'danger', () => act('purge', { queue: q.name },
            r => `Queue ${q.name}: ${num(r.purged)} waiting job(s) purged`,
            { title: `Purge queue ${q.name}?`, ok: 'Purge',
              text: `Every waiting job of ${q.name} (${num(q.depth + q.retry_waiting + q.delayed)} now: queued, delayed, retrying) is cancelled. Jobs in flight are not touched. This cannot be undone.` }),
            { 'data-action': 'purge' })))),
      'No queues yet: a queue appears when a worker announces it or a job is sent to it'),
      COUNTS_LEGEND());
  },
};

// A queue's own page: its counts and actions, then its last ten minutes as
// three charts — jobs per second (submitted, started, succeeded, failed),
// waiting and running, and the run time p50 / p95 of the runs that ended.
views.queue = {
  title: 'Queue',
  build(root, params, arg) {
    this.name = arg;
    this.head = h('div', { class: 'stats', id: 'queue-stats' });
    this.actions = h('div');
    this.charts = {};
    const chartCard = (key, title, series, width) => {
      const body = h('div', { class: 'body chart', 'data-chart': key });
      const legend = h('div');
      this.charts[key] = { body, legend, series, width, title: h('h2', {}, title) };
      return card(this.charts[key].title, legend, body);
    };
    root.append(
      h('h1', {}, 'Queue ', h('span', { class: 'mono', id: 'queue-name' }, arg), h('span', { id: 'queue-state' })),
      card(h('h2', {}, 'Now'), this.actions, this.head),
      chartCard('rates', 'Jobs per second', QUEUE_RATES),
      h('div', { class: 'grid2' },
        chartCard('depth', 'Waiting and running', QUEUE_DEPTH, 500),
        chartCard('runtime', 'Run time (ms)', QUEUE_RUNTIME, 500)));
  },
  async load() {
    const [queues, hist] = await Promise.all([api('queues'), api('queue-stats', { queue: this.name })]);
    return { q: queues.queues.find(q => q.name === this.name), hist };
  },
  render({ q, hist }) {
    const rows = (hist.queues || {})[this.name] || [];
    const pts = queuePoints(hist.fields || [], rows);
    document.getElementById('queue-state').replaceChildren(q ? badge(q.paused ? 'paused' : 'active') : badge('unknown'));
    if (!q) {
      this.head.replaceChildren(h('div', { class: 'body' }, 'The router has no queue named ' + this.name + '.'));
    } else {
      this.head.replaceChildren(
        stat('Waiting', num(q.depth + q.retry_waiting + q.delayed), num(q.retry_waiting) + ' retrying · ' + num(q.delayed) + ' delayed', '', 'waiting'),
        stat('Running', num(q.inflight), num(q.workers) + ' worker(s)', '', 'running'),
        stat('Oldest job', q.oldest_age_ms ? dur(q.oldest_age_ms) : '–', 'since acceptance', '', 'oldest'),
        stat('Submitted', num(q.accepted), 'since the router started', 'accepted', 'submitted'),
        stat('Succeeded', num(q.processed), num(q.finished) + ' finished', 'completed', 'succeeded'),
        stat('Failed', num(q.failed + q.dead_lettered), num(q.dead_lettered) + ' dead-lettered', 'failed', 'failed'),
        stat('Run time', q.run_time && q.run_time.count ? dur(q.run_time.sum_us / q.run_time.count / 1000) : '–',
          'mean of ' + num(q.run_time ? q.run_time.count : 0) + ' run(s)', '', 'runtime'));
      this.actions.replaceChildren(
        h('a', { class: 'btn small', href: '#/jobs?queue=' + encodeURIComponent(q.name), id: 'queue-jobs' }, 'Jobs →'), ' ',
        q.paused
          ? actionButton('Resume', '', () => act('resume', { queue: q.name }, () => `Queue ${q.name} resumed`), { 'data-action': 'resume' })
          : actionButton('Pause', '', () => act('pause', { queue: q.name }, () => `Queue ${q.name} paused`), { 'data-action': 'pause' }));
    }
    const windowMs = windowOf(rows.length ? rows[0][0] : Date.now(), 600000);
    const last = pts.length ? pts[pts.length - 1] : null;
    for (const [key, c] of Object.entries(this.charts)) {
      const fmt = key === 'runtime' ? (v => nf.format(Math.round(v))) : undefined;
      c.body.replaceChildren(lineChart(pts, windowMs, c.series,
        { label: c.title.textContent, fmt, width: c.width, height: c.width ? 200 : 260 }));
      c.legend.replaceChildren(seriesLegend(c.series, k => {
        const v = last ? last[k] : null;
        if (key === 'runtime') return v === null || v === undefined ? '–' : dur(v);
        return key === 'rates' ? rate(v) : num(v);
      }));
    }
    this.charts.rates.title.textContent = 'Jobs per second · last ' + windowMs / 60000 + ' min';
  },
};

// What each count means: one definition for the overview, the queues page,
// `emq-cli status` and `emq-cli queues`.
function COUNTS_LEGEND() {
  return h('p', { class: 'legend sub', id: 'counts-legend' },
    'Depth: waiting for a free slot. In flight: on a job manager now. Retrying: failed, waiting for their next try. ',
    'Delayed: not due yet. Finished = Done + Failed + Dead, since the router started: Done finished ok; ',
    'Failed finished failed with no retry left; Dead dead-lettered (retries or deliveries exhausted). ',
    'Cancelled jobs are in none of them. The overview’s Completed counts Done + Failed, its Failed counts Failed + Dead.');
}

views.workers = {
  title: 'Workers',
  build(root) {
    this.body = h('div');
    root.append(h('h1', {}, 'Workers'), card('Connected job managers', '', this.body));
  },
  async load() { return (await api('workers')).workers; },
  render(workers) {
    this.body.replaceChildren(table(
      ['Worker', 'Queues', ['Credit', 'num'], ['In flight', 'num'], 'Running jobs', 'Connected', 'State', ''],
      workers.map(w => h('tr', { 'data-worker': w.identity },
        // NAME@HOST (the same across reconnects), then pid, concurrency,
        // version and the connection's identity.
        h('td', { class: 'worker-cell', title: (w.features || []).join(', ') },
          w.name ? h('div', { class: 'worker-name' }, w.name) : '',
          h('div', { class: w.name ? 'sub mono' : 'mono' }, [
            w.pid ? 'pid ' + w.pid : '', w.concurrency ? w.concurrency + ' slots' : '', w.version ? 'v' + w.version : '',
          ].filter(Boolean).concat([short(w.identity)]).join(' · '))),
        h('td', {}, (w.queues || []).map(q => h('div', {}, q[1], h('span', { class: 'sub' }, ' · weight ' + q[0])))),
        h('td', { class: 'num' }, num(w.credit)),
        h('td', { class: 'num' }, num(w.inflight)),
        h('td', {}, h('ul', { class: 'running' }, (w.running || []).slice(0, 20).map(r =>
          h('li', {}, jobLink(r.msgid), h('span', { class: 'sub' }, ' ' + (r.queue || '') + ' · ' + dur(r.running_ms))))),
          (w.running || []).length > 20 ? h('span', { class: 'sub' }, `and ${w.running.length - 20} more`) : ''),
        h('td', {}, dur(w.connected_ms)),
        h('td', {}, w.draining ? badge('draining') : badge('active')),
        h('td', { class: 'actions' }, w.draining
          ? actionButton('Undrain', '', () => act('undrain', { worker: w.identity }, () => 'Worker resumed'))
          : actionButton('Drain', '', () => act('drain', { worker: w.identity }, () => 'Worker drained: it gets no new jobs'),
            )))),
      'No job manager connected'));
  },
};

const STATES = ['queued', 'in-flight', 'delayed', 'retrying', 'cancelling', 'done', 'failed', 'cancelled'];

views.jobs = {
  title: 'Jobs',
  build(root, params) {
    this.params = params;
    this.cursors = [];       // cursors of the pages before this one
    this.cursor = params.get('cursor') || null;
    const f = this.form = h('form', { class: 'filters', id: 'job-filters' });
    const input = (name, label, cls, ph) => h('label', {}, label,
      h('input', { name, class: cls, placeholder: ph || '', value: params.get(name) || '', spellcheck: 'false' }));
    const select = (name, label, options) => h('label', {}, label,
      h('select', { name }, options.map(([v, t]) => h('option', { value: v, selected: (params.get(name) || '') === v }, t))));
    this.queueSelect = select('queue', 'Queue', [['', 'All queues']].concat(params.get('queue') ? [[params.get('queue'), params.get('queue')]] : []));
    f.append(
      input('contains', 'Payload contains', 'wide', 'text in the job’s message'),
      this.queueSelect,
      select('state', 'State', [['', 'Any state']].concat(STATES.map(x => [x, x]))),
      select('order', 'Order', [['newest', 'Newest first'], ['oldest', 'Oldest first']]),
      h('button', { class: 'btn primary', type: 'submit' }, 'Search'));
    f.addEventListener('submit', e => {
      e.preventDefault();
      const q = new URLSearchParams();
      for (const [k, v] of new FormData(f)) if (v) q.set(k, v);
      location.hash = '#/jobs' + (q.toString() ? '?' + q : '');
    });
    this.body = h('div');
    this.pager = h('div', { class: 'pager' });
    root.append(h('h1', {}, 'Jobs'),
      card(h('div', { class: 'body' }, f), ''),
      card('Results', h('span', { class: 'sub', id: 'jobs-scanned' }), this.body, this.pager));
    // Fill the queue list once.
    api('queues').then(r => {
      const sel = this.queueSelect.querySelector('select');
      const cur = params.get('queue') || '';
      sel.replaceChildren(h('option', { value: '' }, 'All queues'),
        ...r.queues.map(q => h('option', { value: q.name, selected: q.name === cur }, q.name)));
    }).catch(() => {});
  },
  live() { return !this.cursor; },
  async load() {
    const p = this.params;
    return api('jobs', {
      queue: p.get('queue'), state: p.get('state'), contains: p.get('contains'),
      order: p.get('order'), limit: PAGE, cursor: this.cursor,
    });
  },
  render(r) {
    document.getElementById('jobs-scanned').textContent =
      `${num(r.jobs.length)} shown · ${num(r.scanned)} looked at`;
    this.body.replaceChildren(table(
      ['Msgid', 'Job', 'Queue', 'State', ['Attempts', 'num'], 'Accepted', ['Waited', 'num'], ['Ran', 'num'], 'Worker'],
      r.jobs.map(j => h('tr', { 'data-msgid': j.msgid },
        h('td', {}, shortJobLink(j.msgid)),
        h('td', {}, h('div', { class: 'payload job-summary', title: j.payload, 'data-col': 'job' }, jobSummary(j.payload))),
        h('td', {}, j.queue),
        h('td', {}, badge(j.state)),
        h('td', { class: 'num' }, num(j.attempts)),
        h('td', {}, when(j.accepted_at_ms)),
        h('td', { class: 'num', 'data-col': 'waited' }, j.waited_ms !== undefined ? dur(j.waited_ms) : '–'),
        h('td', { class: 'num', 'data-col': 'runtime' }, runTime(j)),
        j.worker_name ? h('td', { title: j.worker }, j.worker_name)
          : h('td', { class: 'mono', title: j.worker || '' }, j.worker ? short(j.worker) : ''))),
      r.next_cursor ? 'No match among the jobs looked at: search on with “Next”' : 'No jobs match'));
    const prev = h('button', { class: 'btn small', type: 'button', disabled: !this.cursors.length,
      onclick: () => { this.cursor = this.cursors.pop() || null; refresh(); } }, '← Previous');
    const next = h('button', { class: 'btn small', type: 'button', disabled: !r.next_cursor,
      onclick: () => { this.cursors.push(this.cursor); this.cursor = r.next_cursor; refresh(); } }, 'Next →');
    this.pager.replaceChildren(h('span', { class: 'grow' },
      this.cursor ? 'Paused updates while paging' : 'Live: the first page updates every 2 s'), prev, next);
  },
};

views.job = {
  title: 'Job',
  build(root, params, arg) {
    this.msgid = arg;
    this.body = h('div');
    root.append(h('h1', {}, 'Job ', h('span', { class: 'mono', id: 'job-msgid' }, arg), h('span', { id: 'job-state' })), this.body);
  },
  async load() {
    try {
      return (await api('job', { msgid: this.msgid })).job;
    } catch (e) {
      if (e.status === 404) return null;
      throw e;
    }
  },
  render(j) {
    if (!j) {
      document.getElementById('job-state').replaceChildren();
      this.body.replaceChildren(card('Not found', '', h('div', { class: 'body' },
        'The router holds no job with this msgid: it is neither unfinished, nor among the retained finished jobs, nor dead-lettered.')));
      return;
    }
    document.getElementById('job-state').replaceChildren(badge(j.state));
    const unfinished = ['queued', 'in-flight', 'delayed', 'retrying'].includes(j.state);
    const actions = h('div', {},
      unfinished ? actionButton('Cancel job', 'danger', () => act('cancel', { msgid: j.msgid },
        r => `Job ${r.state}`, { title: 'Cancel this job?', ok: 'Cancel job',
          text: j.state === 'in-flight' ? 'The job manager stops the running job; the job ends cancelled.' : 'The job is removed from its queue and ends cancelled.' }),
        { 'data-action': 'cancel' }) : '',
      ['failed', 'cancelled'].includes(j.state) ? actionButton('Retry', '', () => act('requeue', { msgid: j.msgid },
        () => 'Job queued again'), { 'data-action': 'requeue' }) : '',
      j.state === 'dead-lettered' ? [
        actionButton('Retry', '', () => act('dead-retry', { msgid: j.msgid }, () => 'Dead letter queued again'), { 'data-action': 'retry' }),
        ' ',
        actionButton('Discard', 'danger', () => act('dead-discard', { msgid: j.msgid }, () => 'Dead letter discarded',
          { title: 'Discard this dead letter?', text: 'It is removed for good.', ok: 'Discard' })),
      ] : '');
    const row = (k, v) => v === undefined || v === null || v === '' ? [] : [h('dt', {}, k), h('dd', {}, v)];
    const started = j.started_at_ms || j.dispatched_at_ms;
    this.body.replaceChildren(
      card('Details', actions, h('div', { class: 'body' }, h('dl', { class: 'props' },
        row('Queue', j.queue + (j.route && j.route !== j.queue ? ' (route ' + j.route + ')' : '')),
        row('State', badge(j.state)),
        row('Attempts', num(j.attempts)),
        row('Accepted', j.accepted_at_ms ? [stamp(j.accepted_at_ms), ' · ', when(j.accepted_at_ms)] : null),
        row('Started', started ? [stamp(started), ' · ', when(started)] : null),
        row('Waited', j.waited_ms !== undefined ? h('span', { id: 'job-waited' }, dur(j.waited_ms) + ' (accepted → started)') : null),
        row('Running for', j.running_ms !== undefined ? dur(j.running_ms) : null),
        row('Progress', j.progress ? progressBar(j.progress) : null),
        row('Runs at', j.run_at_ms ? [stamp(j.run_at_ms), ' · ', when(j.run_at_ms)] : null),
        row('Finished', j.finished_at_ms ? [stamp(j.finished_at_ms), ' · ', when(j.finished_at_ms)] : null),
        row('Ran', j.ran_ms !== undefined ? h('span', { id: 'job-ran' }, dur(j.ran_ms) + ' (started → finished)') : null),
        row('Worker', j.worker ? (j.worker_name ? [j.worker_name, ' ', h('span', { class: 'sub mono' }, j.worker)]
          : h('span', { class: 'mono' }, j.worker)) : null),
        row('Client', j.client ? h('span', { class: 'mono' }, j.client) : null),
        row('Reason', j.reason || null),
        row('Workflow', j.workflow ? h('a', { href: '#/workflow/' + encodeURIComponent(j.workflow), class: 'mono', id: 'job-workflow' }, j.workflow) : null),
        row('Batch', j.batch ? h('a', { href: '#/batch/' + encodeURIComponent(j.batch), class: 'mono', id: 'job-batch' }, j.batch) : null),
        row('Unique key', j.unique_key ? [h('span', { class: 'mono' }, j.unique_key), j.unique_held ? ' · held' : ' · released'] : null),
        row('Headers', j.headers ? h('span', { class: 'mono' }, j.headers) : h('span', { class: 'sub' }, 'none'))))),
      j.last_error ? card('Last error', '', h('div', { class: 'body' }, failureView(j.last_error))) : '',
      'result' in j && j.state === 'done' ? card('Result', j.result_truncated ? h('span', { class: 'sub' }, 'too large: not kept') : '',
        h('div', { class: 'body' }, h('pre', { class: 'block', id: 'job-result' }, text(j.result)))) : '',
      card('Payload', j.payload_truncated ? h('span', { class: 'sub' }, 'first 1,000 bytes') : '',
        h('div', { class: 'body' }, h('pre', { class: 'block' }, prettyPayload(j.payload)))));
  },
};

// A workflow (WORKFLOW: a chain, group, chord or DAG) as a tree: each node
// under its first parent (others named), with its state, times, value or
// error; its job links to the job view.
views.workflow = {
  title: 'Workflow',
  build(root, params, arg) {
    this.id = arg;
    this.body = h('div');
    root.append(h('h1', {}, 'Workflow ', h('span', { class: 'mono', id: 'wf-id' }, arg), h('span', { id: 'wf-state' })), this.body);
  },
  async load() {
    try {
      return (await api('workflow', { id: this.id })).workflow;
    } catch (e) {
      if (e.status === 404) return null;
      throw e;
    }
  },
  render(w) {
    if (!w) {
      document.getElementById('wf-state').replaceChildren();
      this.body.replaceChildren(card('Not found', '', h('div', { class: 'body' },
        'The router holds no workflow with this id: it is neither unfinished nor a finished one still kept (WORKFLOWS_KEEP, WORKFLOWS_KEEP_FOR).')));
      return;
    }
    document.getElementById('wf-state').replaceChildren(badge(w.state === 'running' ? 'in-flight' : w.state));
    const nodes = w.nodes || [];
    const counts = {};
    for (const n of nodes) counts[n.state] = (counts[n.state] || 0) + 1;
    const kids = new Map();
    for (const n of nodes) {
      const first = (n.after || [])[0];
      if (first !== undefined) {
        if (!kids.has(first)) kids.set(first, []);
        kids.get(first).push(n);
      }
    }
    const item = n => {
      const others = (n.after || []).slice(1);
      const err = n.error && (n.error.error || n.error);
      return h('li', { 'data-node': n.id },
        h('span', { class: 'mono' }, n.id), ' ', badge(n.state === 'started' ? 'in-flight' : n.state), ' ',
        jobLink(n.msgid),
        others.length ? h('span', { class: 'sub' }, ' also after ' + others.join(', ')) : '',
        n.queued_at_unix_ms ? h('span', { class: 'sub' }, ' · queued ', when(n.queued_at_unix_ms)) : '',
        n.started_at_unix_ms ? h('span', { class: 'sub' }, ' · started ', when(n.started_at_unix_ms)) : '',
        n.finished_at_unix_ms ? h('span', { class: 'sub' }, ' · ended ', when(n.finished_at_unix_ms)) : '',
        n.took_ms !== undefined ? h('span', { class: 'sub' }, ' · took ' + (n.took_ms / 1000).toFixed(n.took_ms < 10000 ? 2 : 0) + ' s') : '',
        'value' in n ? h('span', { class: 'mono' }, ' → ' + text(n.value).slice(0, 200)) : '',
        err ? h('span', { class: 'error-text' }, ' ' + errorText(err)) : '',
        kids.has(n.id) ? h('ul', {}, kids.get(n.id).map(item)) : '');
    };
    const roots = nodes.filter(n => !(n.after || []).length);
    const cancellable = w.state === 'running' || w.state === 'pending';
    this.body.replaceChildren(
      card('Progress', cancellable ? actionButton('Cancel workflow', 'danger', () => act('cancel', { msgid: w.workflow },
        () => 'Workflow cancelled', { title: 'Cancel this workflow?', ok: 'Cancel workflow',
          text: 'Its waiting nodes are cancelled and its running jobs stopped.' }), { 'data-action': 'cancel' }) : '',
        h('div', { class: 'body' }, h('dl', { class: 'props' },
          h('dt', {}, 'Nodes'), h('dd', { id: 'wf-counts' }, Object.entries(counts).map(([k, v]) => k + ' ' + num(v)).join(' · ')),
          h('dt', {}, 'Accepted'), h('dd', {}, w.accepted_at_unix_ms ? [stamp(w.accepted_at_unix_ms), ' · ', when(w.accepted_at_unix_ms)] : '–'),
          h('dt', {}, 'Finished'), h('dd', {}, w.finished_at_unix_ms ? [stamp(w.finished_at_unix_ms), ' · ', when(w.finished_at_unix_ms)] : '–')))),
      card('Tree', '', h('div', { class: 'body' }, h('ul', { class: 'tree', id: 'wf-tree' }, roots.map(item)))));
  },
};

// A batch (BATCH, Sidekiq-style): a bar of its ended jobs (succeeded and
// failed), the counts, its callbacks (linked to their jobs) and its first
// failed jobs.
views.batch = {
  title: 'Batch',
  build(root, params, arg) {
    this.id = arg;
    this.body = h('div');
    root.append(h('h1', {}, 'Batch ', h('span', { class: 'mono', id: 'batch-id' }, arg), h('span', { id: 'batch-state' })), this.body);
  },
  async load() {
    try {
      return (await api('batch', { id: this.id })).batch;
    } catch (e) {
      if (e.status === 404) return null;
      throw e;
    }
  },
  render(b) {
    if (!b) {
      document.getElementById('batch-state').replaceChildren();
      this.body.replaceChildren(card('Not found', '', h('div', { class: 'body' },
        'The router holds no batch with this id: it is neither unfinished nor among the last finished.')));
      return;
    }
    document.getElementById('batch-state').replaceChildren(badge(b.state,
      b.state === 'finished' ? (b.failed ? 'failed' : 'done') : b.state === 'open' ? 'queued' : 'in-flight'));
    const pct = n => b.total ? (100 * n / b.total).toFixed(2) + '%' : '0%';
    const bar = h('div', { class: 'batch-bar', id: 'batch-bar', role: 'img',
      'aria-label': `${b.succeeded} succeeded, ${b.failed} failed, ${b.pending} pending of ${b.total}` },
      h('span', { class: 'ok' }), h('span', { class: 'failed' }));
    // Widths through the CSSOM: the page's CSP refuses style attributes.
    bar.children[0].style.width = pct(b.succeeded);
    bar.children[1].style.width = pct(b.failed);
    const row = (k, v, id) => v === undefined || v === null || v === '' ? [] : [h('dt', {}, k), h('dd', id ? { id } : {}, v)];
    const cbs = Object.entries(b.callbacks || {}).map(([name, c]) =>
      h('li', {}, h('span', { class: 'mono' }, name), ' ',
        badge(c.state, c.state === 'submitted' ? 'done' : c.state === 'skipped' ? 'cancelled' : 'queued'), ' ', c.state === 'submitted' ? jobLink(c.msgid) : h('span', { class: 'mono sub' }, c.msgid)));
    const cancellable = b.state !== 'finished' && !b.cancelled_at_unix_ms;
    this.body.replaceChildren(
      card('Progress', cancellable ? actionButton('Cancel batch', 'danger', () => act('cancel', { msgid: b.batch },
        r => `Batch ${r.state}`, { title: 'Cancel this batch?', ok: 'Cancel batch',
          text: 'It is closed, its waiting jobs are cancelled and its running jobs stopped; they count as failed, so on_complete runs and on_success does not.' }),
        { 'data-action': 'cancel' }) : '', h('div', { class: 'body' }, bar, h('dl', { class: 'props' },
        row('Counts', `${num(b.succeeded + b.failed)} of ${num(b.total)} ended · ${num(b.succeeded)} succeeded · ${num(b.failed)} failed · ${num(b.pending)} pending`, 'batch-counts'),
        row('Description', b.description || null),
        row('Opened', b.opened_at_unix_ms ? [stamp(b.opened_at_unix_ms), ' · ', when(b.opened_at_unix_ms)] : null),
        row('Closed', b.closed_at_unix_ms ? [stamp(b.closed_at_unix_ms), ' · ', when(b.closed_at_unix_ms)] : h('span', { class: 'sub' }, 'open: jobs may still join')),
        row('Cancelled', b.cancelled_at_unix_ms ? [stamp(b.cancelled_at_unix_ms), ' · ', when(b.cancelled_at_unix_ms)] : null, 'batch-cancelled'),
        row('Finished', b.finished_at_unix_ms ? [stamp(b.finished_at_unix_ms), ' · ', when(b.finished_at_unix_ms)] : null)))),
      cbs.length ? card('Callbacks', '', h('div', { class: 'body' }, h('ul', { class: 'tree', id: 'batch-callbacks' }, cbs))) : '',
      (b.failed_ids || []).length ? card('Failed jobs', b.failed > b.failed_ids.length ? h('span', { class: 'sub' }, 'the first ' + num(b.failed_ids.length)) : '',
        h('div', { class: 'body' }, h('ul', { class: 'tree', id: 'batch-failed' }, b.failed_ids.map(m => h('li', {}, jobLink(m)))))) : '');
  },
};

// A running job's last reported progress (emq_job.progress): a bar, the
// percent and message, and when it was reported.
function progressBar(p) {
  return h('span', { class: 'job-progress', id: 'job-progress' },
    h('progress', { max: '100', value: String(p.percent), 'aria-label': 'job progress' }),
    ' ', h('strong', {}, p.percent + ' %'),
    p.message ? [' · ', p.message] : '',
    p.at_ms ? h('span', { class: 'sub' }, ' · reported ', when(p.at_ms)) : '');
}

// A job as people think of it: `module.function(args, key=value)` for a
// Python job, `$ argv` for a shell job, `handler(args)` for a call; the raw
// payload for anything else.
function jobSummary(p) {
  let v;
  try { v = JSON.parse(p); } catch (_) { return p; }
  if (!Array.isArray(v) || typeof v[0] !== 'string' || typeof v[1] !== 'object' || !v[1]) return p;
  const o = v[1];
  const show = x => { try { return JSON.stringify(x); } catch (_) { return String(x); } };
  const args = (a, kw) => (Array.isArray(a) ? a.map(show) : []).concat(
    kw && typeof kw === 'object' ? Object.entries(kw).map(([k, x]) => k + '=' + show(x)) : []).join(', ');
  if (v[0] === 'run' && o.callable) return (o.path ? o.path + '.' : '') + o.callable + '(' + args(o.args, o.kwargs) + ')';
  if (v[0] === 'shell' && Array.isArray(o.argv)) return '$ ' + o.argv.join(' ');
  if (v[0] === 'call' && o.handler) return o.handler + '(' + (o.args === undefined ? '' : show(o.args)) + ')';
  return p;
}
// How long a job ran: a running job's time on its worker so far, a
// finished job's from its start to its end (not from its acceptance: the
// wait is its own column); – when it never started.
function runTime(j) {
  if (j.running_ms !== undefined && j.running_ms !== null) return dur(j.running_ms) + ' so far';
  if (j.ran_ms !== undefined && j.ran_ms !== null) return dur(j.ran_ms);
  return '–';
}

function prettyPayload(p) {
  try { return JSON.stringify(JSON.parse(p), null, 2); } catch (_) { return p; }
}

views.dead = {
  title: 'Dead letters',
  build(root, params) {
    this.params = params;
    this.skip = 0;
    const f = h('form', { class: 'filters' },
      h('label', {}, 'Queue', h('input', { name: 'queue', value: params.get('queue') || '', spellcheck: 'false' })),
      h('label', {}, 'Payload contains', h('input', { name: 'contains', class: 'wide', value: params.get('contains') || '', spellcheck: 'false' })),
      h('button', { class: 'btn primary', type: 'submit' }, 'Filter'));
    f.addEventListener('submit', e => {
      e.preventDefault();
      const q = new URLSearchParams();
      for (const [k, v] of new FormData(f)) if (v) q.set(k, v);
      location.hash = '#/dead' + (q.toString() ? '?' + q : '');
    });
    this.count = h('span', { class: 'sub' });
    this.bulk = h('div');
    this.body = h('div');
    this.pager = h('div', { class: 'pager' });
    root.append(h('h1', {}, 'Dead letters'),
      card(h('div', { class: 'body' }, f), ''),
      card(h('h2', {}, 'Jobs that failed for good ', this.count), this.bulk, this.body, this.pager));
  },
  live() { return this.skip === 0; },
  async load() {
    const p = this.params;
    return api('dead', { queue: p.get('queue'), contains: p.get('contains'), limit: PAGE, cursor: this.skip ? String(this.skip) : null });
  },
  render(r) {
    const filter = { queue: this.params.get('queue') || undefined, contains: this.params.get('contains') || undefined };
    const filtered = filter.queue || filter.contains;
    this.count.textContent = `· ${num(r.count)}${filtered ? ' matching' : ''}`;
    this.bulk.replaceChildren(
      actionButton(filtered ? 'Retry all matching' : 'Retry all', '', () => act('dead-retry', Object.assign({ all: true }, filter),
        x => `${num(x.retried)} dead letter(s) queued again`,
        { title: 'Retry ' + num(r.count) + ' dead letter(s)?', ok: 'Retry all',
          text: 'Each goes back to its queue as a new delivery of the same job (attempts reset).' }), { disabled: !r.count || state.readOnly }),
      ' ',
      actionButton(filtered ? 'Discard all matching' : 'Discard all', 'danger', () => act('dead-discard', Object.assign({ all: true }, filter),
        x => `${num(x.discarded)} dead letter(s) discarded`,
        { title: 'Discard ' + num(r.count) + ' dead letter(s)?', ok: 'Discard all', text: 'They are removed for good.' }),
      { disabled: !r.count || state.readOnly }));
    this.body.replaceChildren(table(
      ['Msgid', 'Queue', 'Reason', 'Last error', ['Attempts', 'num'], 'Dead since', 'Payload', ''],
      r.dead_letters.map(d => h('tr', { 'data-msgid': d.msgid },
        h('td', {}, shortJobLink(d.msgid)),
        h('td', {}, d.queue),
        h('td', { class: 'wrap' }, d.reason),
        h('td', {}, h('div', { class: 'payload error-text', title: errorText(d.error && d.error.error || d.error) },
          errorText(d.error && d.error.error || d.error))),
        h('td', { class: 'num' }, num(d.attempts)),
        h('td', {}, when(d.at_ms)),
        h('td', {}, h('div', { class: 'payload', title: d.payload }, jobSummary(d.payload))),
        h('td', { class: 'actions' },
          actionButton('Retry', '', () => act('dead-retry', { msgid: d.msgid }, () => 'Dead letter queued again'), { 'data-action': 'retry' }),
          actionButton('Discard', 'danger', () => act('dead-discard', { msgid: d.msgid }, () => 'Dead letter discarded',
            { title: 'Discard this dead letter?', text: d.msgid + ' is removed for good.', ok: 'Discard' }), { 'data-action': 'discard' })))),
      'No dead letters'));
    const prev = h('button', { class: 'btn small', type: 'button', disabled: this.skip === 0,
      onclick: () => { this.skip = Math.max(0, this.skip - PAGE); refresh(); } }, '← Newer');
    const next = h('button', { class: 'btn small', type: 'button', disabled: !r.next_cursor,
      onclick: () => { this.skip = Number(r.next_cursor); refresh(); } }, 'Older →');
    this.pager.replaceChildren(h('span', { class: 'grow' }, r.count ? `${num(this.skip + 1)}–${num(this.skip + r.dead_letters.length)} of ${num(r.count)}` : ''), prev, next);
  },
};

views.schedules = {
  title: 'Schedules',
  build(root) {
    this.body = h('div');
    root.append(h('h1', {}, 'Schedules'), card('Built-in schedules', '', this.body));
  },
  async load() { return (await api('schedules')).schedules; },
  render(list) {
    const sorted = [...list].sort((a, b) => (a.next_run_ms || Infinity) - (b.next_run_ms || Infinity));
    this.body.replaceChildren(table(
      ['Id', 'Queue', 'Every', 'Next run', 'Last run', ['Runs', 'num'], 'Message', ''],
      sorted.map(sc => h('tr', { 'data-schedule': sc.id },
        h('td', { class: 'mono', title: sc.id }, short(sc.id)),
        h('td', {}, sc.queue),
        h('td', {}, sc.cron ? h('span', { class: 'mono' }, sc.cron) : dur(sc.interval_secs * 1000),
          sc.nohaste ? h('span', { class: 'sub' }, ' · nohaste') : ''),
        h('td', {}, sc.next_run_ms ? when(sc.next_run_ms) : h('span', { class: 'sub' }, 'none')),
        h('td', {}, when(sc.last_run_ms)),
        h('td', { class: 'num' }, num(sc.run_count) + (sc.run_limit ? ' / ' + num(sc.run_limit) : '')),
        h('td', {}, h('div', { class: 'payload', title: sc.message }, sc.message)),
        h('td', { class: 'actions' }, actionButton('Remove', 'danger', () => act('unschedule', { id: sc.id },
          () => 'Schedule removed', { title: 'Remove this schedule?', ok: 'Remove',
            text: `Schedule ${sc.id} on ${sc.queue} stops; jobs it already sent are not touched.` }))))),
      'No schedules: clients add them with SCHEDULE'));
  },
};

// Flow control: each queue's policy with its keys, and a form to change it
// (docs/PROTOCOL.md, "Flow control").
views.limits = {
  title: 'Limits',
  build(root) {
    this.body = h('div');
    const field = (name, label, placeholder) => h('label', {}, label,
      h('input', { name, placeholder, size: 9, spellcheck: 'false' }));
    const form = h('form', { class: 'limits-form', autocomplete: 'off' },
      field('queue', 'Queue', 'email'),
      field('concurrency', 'Concurrency', 'N, 0: none'),
      field('concurrency_per_key', 'Per key', 'N, 0: none'),
      field('rate', 'Rate', 'N/SECS, none'),
      field('rate_per_key', 'Rate per key', 'N/SECS, none'),
      h('label', {}, 'Fair', h('select', { name: 'fair' },
        h('option', { value: '' }, 'unchanged'), h('option', { value: 'true' }, 'on'), h('option', { value: 'false' }, 'off'))),
      h('button', { class: 'btn', type: 'submit', disabled: state.readOnly }, 'Set'));
    form.addEventListener('submit', e => {
      e.preventDefault();
      const f = new FormData(form);
      const args = { queue: (f.get('queue') || '').trim() };
      for (const k of ['concurrency', 'concurrency_per_key']) {
        const v = (f.get(k) || '').trim();
        if (v !== '') args[k] = Number(v);
      }
      for (const k of ['rate', 'rate_per_key']) {
        const v = (f.get(k) || '').trim();
        if (v !== '') args[k] = v;
      }
      if (f.get('fair')) args.fair = f.get('fair') === 'true';
      act('limits-set', args, r => `Queue ${r.queue}: ${r.text}`);
    });
    root.append(h('h1', {}, 'Limits'),
      card('Set a policy', h('span', { class: 'sub' }, 'fields left empty stay as they are'), form),
      this.body);
  },
  async load() { return (await api('limits-show')).limits; },
  render(limits) {
    if (!limits.length) {
      this.body.replaceChildren(card('Policies', '', h('p', { class: 'empty' },
        'No flow-control policy: set one above, with emq-cli limits set, or emq-router --limit')));
      return;
    }
    this.body.replaceChildren(...limits.map(l => card(
      h('h2', {}, 'Queue ', h('a', { href: '#/jobs?queue=' + encodeURIComponent(l.queue) }, l.queue), ' ',
        h('span', { class: 'sub mono' }, l.text)),
      actionButton('Clear', 'danger', () => act('limits-clear', { queue: l.queue }, () => `Queue ${l.queue}: no limits`,
        { title: `Clear the limits of ${l.queue}?`, ok: 'Clear',
          text: `Its held jobs go as workers are free. The router journals the change.` }), { 'data-action': 'limits-clear' }),
      h('p', { class: 'sub' },
        `running ${num(l.running)} · waiting ${num(l.waiting)} · held by a limit ${num(l.limited)} · ` +
        `throttled ${num(l.throttled)} · active keys ${num(l.active_keys)}` +
        (l.presumed ? ` · presumed running ${num(l.presumed)}` : '')),
      table(['Key', ['Running', 'num'], ['Waiting', 'num'], 'Held'],
        (l.keys || []).map(k => h('tr', { 'data-key': k.key },
          h('td', { class: 'mono' }, k.key === '' ? '(no key)' : k.key),
          h('td', { class: 'num' }, num(k.running)),
          h('td', { class: 'num' }, num(k.waiting)),
          h('td', {}, k.blocked || ''))),
        'No key has jobs running or waiting'))));
  },
};

// ---------------------------------------------------------------- routing

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, '') || 'overview';
  const [path, qs] = raw.split('?');
  const [name, ...rest] = path.split('/');
  return { name, arg: rest.length ? decodeURIComponent(rest.join('/')) : null, params: new URLSearchParams(qs || '') };
}

function navigate() {
  const { name, arg, params } = parseHash();
  const view = views[name] || views.overview;
  const key = location.hash;
  if (state.route === key && state.view) return;
  state.route = key;
  state.view = view;
  for (const a of document.querySelectorAll('#nav a')) {
    a.classList.toggle('active', a.dataset.view === name || ((name === 'job' || name === 'workflow' || name === 'batch') && a.dataset.view === 'jobs') ||
      (name === 'queue' && a.dataset.view === 'queues'));
  }
  document.title = view.title + (arg ? ' ' + arg : '') + ' · emq';
  const main = document.getElementById('main');
  main.replaceChildren();
  view.build(main, params, arg);
  main.dataset.view = name;
  refresh(true);
}

let seq = 0;
async function refresh(force) {
  const view = state.view;
  if (!view) return;
  if (!force && (document.hidden || document.getElementById('confirm').open)) return;
  const my = ++seq;
  try {
    const data = await view.load();
    if (my !== seq || view !== state.view) return; // a newer load or another view
    view.render(data);
    document.getElementById('main').dataset.loaded = String(Date.now());
    setLive(true, 'live · ' + new Date().toLocaleTimeString());
  } catch (e) {
    if (my !== seq) return;
    setLive(false, e.status === 401 ? 'token needed' : 'router unreachable: ' + e.message);
  }
}

async function tick() {
  const view = state.view;
  if (view && (!view.live || view.live())) await refresh();
  // The number of dead letters kept, in the navigation bar.
  try {
    const n = (await api('dead', { limit: 1 })).count;
    document.getElementById('dead-count').textContent = n ? nf.format(n) : '';
  } catch (_) { /* shown by refresh */ }
}

async function start() {
  try {
    const info = await api('info');
    state.readOnly = !!info.read_only;
    state.version = info.version;
    if (state.readOnly) {
      document.getElementById('live').after(h('span', { class: 'badge paused', title: '--http-read-only' }, 'read-only'));
    }
  } catch (_) { /* the views report it */ }
  document.getElementById('quick-find').addEventListener('submit', e => {
    e.preventDefault();
    const v = document.getElementById('quick-msgid').value.trim();
    if (v) location.hash = '#/job/' + encodeURIComponent(v);
  });
  window.addEventListener('hashchange', navigate);
  navigate();
  tick();
  setInterval(tick, POLL_MS);
}

start();

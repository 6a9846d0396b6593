// The lookalike web app: hash routes over the JSON API (README, "serve").
// Text from the server is always set as text (textContent), never as HTML.
'use strict';

const $ = (id) => document.getElementById(id);
const state = { upload: null, uploadUrl: null, dedup: null, page: 0 };
const PAGE = 48;

function el(tag, props, ...children) {
  const e = document.createElement(tag);
  Object.assign(e, props || {});
  for (const c of children) e.append(c);
  return e;
}

function setStatus(id, text, isError) {
  $(id).textContent = text;
  $(id).classList.toggle('error', !!isError);
}

async function api(url, options) {
  const res = await fetch(url, options);
  const body = await res.json().catch(() => null);
  if (!res.ok) throw new Error(body && body.error ? body.error.message : 'HTTP ' + res.status);
  return body;
}

function baseName(path) { return path.split('/').pop(); }
function fixed(v, n) { return typeof v === 'number' ? v.toFixed(n) : '–'; }
function fileSize(b) {
  if (b >= 1 << 20) return (b / (1 << 20)).toFixed(1) + ' MiB';
  if (b >= 1024) return (b / 1024).toFixed(1) + ' KiB';
  return b + ' B';
}

function thumb(id, size) {
  const img = el('img', { alt: '', loading: 'lazy', src: '/api/images/' + id + '/thumbnail' + (size ? '?size=' + size : '') });
  return img;
}

function card(id, path, lines, cls) {
  const c = el('div', { className: 'card ' + (cls || '') });
  c.dataset.id = id;
  c.append(el('a', { className: 'thumb', href: '#/similar/' + id, title: 'search by this image' }, thumb(id)));
  for (const l of lines) c.append(l);
  c.append(el('div', { className: 'path', title: path, textContent: baseName(path) }));
  return c;
}

// ----------------------------------------------------------------- search

function showResults(data, queryKey) {
  const grid = $('results');
  grid.replaceChildren();
  data.results.forEach((h) => {
    const meta = el('div', { className: 'meta' },
      el('span', { className: 'rank', textContent: '#' + h.rank + ' ' }),
      'score ' + fixed(h.score, 4));
    const detail = el('div', { className: 'meta', textContent:
      'VLAD ' + fixed(h.similarity, 3) + ' · colour ' + fixed(h.colour, 3) +
      ' · inliers ' + (h.inliers === undefined ? '–' : h.inliers) +
      (h.thumbnail === undefined ? '' : ' · thumbnail ' + fixed(h.thumbnail, 3)) });
    const match = el('a', { className: 'match-link', href: '#/match/' + queryKey + '/' + h.id, textContent: 'why? matches' });
    const c = card(h.id, h.path, [meta, detail, match], h.inliers >= 8 ? 'verified' : '');
    c.dataset.rank = h.rank;
    c.dataset.path = h.path;
    grid.append(c);
  });
  const warn = data.warning ? ' (' + data.warning + ')' : '';
  setStatus('search-status', data.results.length + ' results in ' + fixed(data.seconds, 2) + ' s' + warn);
}

function k() { return Math.max(1, Math.min(100, parseInt($('k').value, 10) || 12)); }

async function searchUpload(file) {
  state.upload = file;
  if (state.uploadUrl) URL.revokeObjectURL(state.uploadUrl);
  state.uploadUrl = URL.createObjectURL(file);
  $('query').replaceChildren(el('img', { src: state.uploadUrl, alt: 'query' }),
    el('div', { className: 'path', textContent: file.name }));
  $('results').replaceChildren();
  setStatus('search-status', 'Searching…');
  if (location.hash !== '#/search') history.replaceState(null, '', '#/search');
  show('search');
  const form = new FormData();
  form.append('image', file, file.name);
  form.append('k', String(k()));
  try {
    showResults(await api('/api/search', { method: 'POST', body: form }), 'upload');
  } catch (e) {
    setStatus('search-status', 'Search failed: ' + e.message, true);
  }
}

async function searchIndexed(id) {
  show('search');
  $('query').replaceChildren(thumb(id));
  $('results').replaceChildren();
  setStatus('search-status', 'Searching…');
  try {
    const data = await api('/api/images/' + id + '/similar?k=' + k());
    $('query').append(el('div', { className: 'path', textContent: data.query }));
    showResults(data, String(id));
  } catch (e) {
    setStatus('search-status', 'Search failed: ' + e.message, true);
  }
}

// ------------------------------------------------------------------ match

function loadImage(src) {
  return new Promise((resolve, reject) => {
    const img = new Image();
    img.onload = () => resolve(img);
    img.onerror = () => reject(new Error('could not load ' + src));
    img.src = src;
  });
}

async function showMatch(a, b) {
  show('match');
  const canvas = $('match-canvas');
  delete canvas.dataset.lines;
  canvas.getContext('2d').clearRect(0, 0, canvas.width, canvas.height);
  setStatus('match-status', 'Matching…');
  try {
    let data, srcA;
    if (a === 'upload') {
      if (!state.upload) throw new Error('upload an image first: the query is kept in this page only');
      const form = new FormData();
      form.append('image', state.upload, state.upload.name);
      data = await api('/api/matches/' + b, { method: 'POST', body: form });
      srcA = state.uploadUrl;
    } else {
      data = await api('/api/images/' + a + '/matches/' + b);
      srcA = '/api/images/' + a + '/thumbnail?size=640';
    }
    const [ia, ib] = await Promise.all([loadImage(srcA), loadImage('/api/images/' + b + '/thumbnail?size=640')]);
    const h = 480, gap = 16;
    const wa = Math.round(ia.naturalWidth * h / ia.naturalHeight);
    const wb = Math.round(ib.naturalWidth * h / ib.naturalHeight);
    canvas.width = wa + gap + wb;
    canvas.height = h;
    const ctx = canvas.getContext('2d');
    ctx.fillStyle = '#111';
    ctx.fillRect(0, 0, canvas.width, h);
    ctx.drawImage(ia, 0, 0, wa, h);
    ctx.drawImage(ib, wa + gap, 0, wb, h);
    ctx.lineWidth = 1.2;
    data.lines.forEach((l, i) => {
      ctx.strokeStyle = 'hsl(' + ((i * 47) % 360) + ', 90%, 55%)';
      ctx.beginPath();
      ctx.moveTo(l[0] * wa, l[1] * h);
      ctx.lineTo(wa + gap + l[2] * wb, l[3] * h);
      ctx.stroke();
    });
    canvas.dataset.lines = String(data.lines.length);
    canvas.dataset.gapX = String(wa);  // the strip between the pictures, which only lines cross
    canvas.dataset.gapWidth = String(gap);
    const name = data.a.path || data.a.query;
    setStatus('match-status', data.inliers + ' inliers of ' + data.matches + ' matches' +
      (data.verified ? ' (verified)' : ' (not enough to count as verified)') + ': ' +
      baseName(name) + ' ↔ ' + baseName(data.b.path));
  } catch (e) {
    canvas.dataset.lines = '0';
    setStatus('match-status', 'Match failed: ' + e.message, true);
  }
}

// ------------------------------------------------------------- duplicates

async function showDuplicates() {
  show('duplicates');
  const box = $('groups');
  if (!state.dedup) {
    box.replaceChildren();
    setStatus('dup-status', 'Comparing every image with its most similar ones…');
    try {
      state.dedup = await api('/api/dedup');
    } catch (e) {
      setStatus('dup-status', 'Failed: ' + e.message, true);
      return;
    }
  }
  const d = state.dedup;
  box.replaceChildren();
  d.groups.forEach((g) => {
    const row = el('div', { className: 'row' });
    g.members.forEach((m) => {
      const lines = [el('div', { className: 'meta', textContent: m.width + '×' + m.height + ' px · ' + fileSize(m.bytes) })];
      if (m.id === g.keep) lines.unshift(el('div', {}, el('span', { className: 'keep', textContent: 'keep' })));
      else lines.push(el('div', { className: 'meta', textContent: 'score ' + fixed(m.score, 3) }));
      const c = card(m.id, m.path, lines, m.id === g.keep ? 'keeper' : '');
      row.append(c);
    });
    box.append(el('div', { className: 'group' },
      el('h3', { textContent: 'Group ' + g.group + ' · ' + g.members.length + ' images' }), row));
  });
  setStatus('dup-status', d.groups.length + ' groups of near-duplicates among ' + d.images +
    ' images. The one marked keep has the most pixels, then the largest file.');
}

function download(name, type, text) {
  const a = el('a', { href: URL.createObjectURL(new Blob([text], { type })), download: name });
  document.body.append(a);
  a.click();
  a.remove();
}

function csvField(v) {
  const s = String(v);
  return /[",\n\r]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
}

function exportDuplicates(kind) {
  if (!state.dedup) return;
  if (kind === 'json') {
    download('duplicates.json', 'application/json', JSON.stringify(state.dedup.groups, null, 1));
    return;
  }
  const rows = [['group', 'keep', 'id', 'path', 'width', 'height', 'bytes', 'score']];
  state.dedup.groups.forEach((g) => g.members.forEach((m) =>
    rows.push([g.group, m.id === g.keep ? 1 : 0, m.id, m.path, m.width, m.height, m.bytes, m.score])));
  download('duplicates.csv', 'text/csv', rows.map((r) => r.map(csvField).join(',')).join('\n') + '\n');
}

// ------------------------------------------------------------- collection

async function showCollection(page) {
  show('collection');
  state.page = page;
  try {
    const info = await api('/api/info');
    const rows = [
      ['database', info.path], ['images', info.images + ' (' + info.searchable + ' searchable)'],
      ['without features', info.images_without_features], ['descriptors', info.descriptors],
      ['size on disk', fileSize(info.size_bytes)],
      ['model', info.model.descriptor + ', ' + info.model.clusters + ' clusters, max side ' + info.model.max_side + ' px'],
      ['PCA', info.pca ? info.pca.out_dim + '-d' + (info.pca.whiten ? ', whitened' : '') : 'none'],
      ['schema', info.schema_version]];
    $('info').replaceChildren(...rows.map(([k, v]) => el('tr', {}, el('td', { textContent: k }), el('td', { textContent: String(v) }))));
    const list = await api('/api/images?offset=' + page * PAGE + '&limit=' + PAGE);
    const pages = Math.max(1, Math.ceil(list.total / PAGE));
    setStatus('page-status', 'page ' + (page + 1) + ' of ' + pages + ' · ' + list.total + ' images');
    $('prev').disabled = page <= 0;
    $('next').disabled = page + 1 >= pages;
    $('images').replaceChildren(...list.images.map((m) => card(m.id, m.path,
      [el('div', { className: 'meta', textContent: m.width + '×' + m.height + ' px · ' + fileSize(m.bytes) })])));
  } catch (e) {
    setStatus('page-status', 'Failed: ' + e.message, true);
  }
}

// ---------------------------------------------------------------- routing

function show(view) {
  for (const v of ['search', 'match', 'duplicates', 'collection']) $('view-' + v).hidden = v !== view;
  for (const v of ['search', 'duplicates', 'collection']) $('nav-' + v).classList.toggle('active', v === view || (v === 'search' && view === 'match'));
}

function route() {
  const parts = location.hash.replace(/^#\/?/, '').split('/');
  if (parts[0] === 'similar' && /^\d+$/.test(parts[1])) return searchIndexed(parts[1]);
  if (parts[0] === 'match' && /^(\d+|upload)$/.test(parts[1]) && /^\d+$/.test(parts[2])) return showMatch(parts[1], parts[2]);
  if (parts[0] === 'duplicates') return showDuplicates();
  if (parts[0] === 'collection') return showCollection(/^\d+$/.test(parts[1]) ? parseInt(parts[1], 10) : 0);
  show('search');
}

document.addEventListener('DOMContentLoaded', () => {
  $('file').addEventListener('change', () => { if ($('file').files[0]) searchUpload($('file').files[0]); });
  const drop = $('drop');
  drop.addEventListener('dragover', (e) => { e.preventDefault(); drop.classList.add('over'); });
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', (e) => {
    e.preventDefault();
    drop.classList.remove('over');
    if (e.dataTransfer.files[0]) searchUpload(e.dataTransfer.files[0]);
  });
  $('export-json').addEventListener('click', () => exportDuplicates('json'));
  $('export-csv').addEventListener('click', () => exportDuplicates('csv'));
  $('prev').addEventListener('click', () => { location.hash = '#/collection/' + Math.max(0, state.page - 1); });
  $('next').addEventListener('click', () => { location.hash = '#/collection/' + (state.page + 1); });
  window.addEventListener('hashchange', route);
  route();
});

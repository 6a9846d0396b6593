// The lookalike web app: hash routes over the JSON API (README, "serve").
// Text from the server is always set as text (textContent), never as HTML.
'use strict';

const $ = (id) => document.getElementById(id);
const state = {
  query: null,       // {kind: 'upload', file, url, serial} or {kind: 'id', id}
  uploads: 0,        // uploads so far: a new serial per pick, even of the same file
  searchSeq: 0,      // the latest search started; older answers are dropped
  inflight: null,    // what the running search asked for (query and k)
  searches: 0,       // searches answered (data-searches on the status, for tests)
  lastResults: null,
  dedup: null,
  selected: new Set(),
  page: 0,
  match: null,       // the match view's data, redrawn when its line toggle changes
};
const PAGE = 48;
const MAX_LINES = 100;  // inlier lines drawn until "show all" is pressed

// Match levels, weakest first (search/match_level.h); what each means.
const LEVELS = ['none', 'view', 'part', 'copy', 'identical'];
const LEVEL_TEXT = {
  identical: 'identical: the same pixels',
  copy: 'copy: the same picture, edited (re-encoded, resized, recoloured, cropped a little, rotated or mirrored)',
  part: 'part: one shows a part of the other',
  view: 'view: the same scene or object in another shot',
  none: 'not a match: only looks alike',
};
function levelRank(level) { return LEVELS.indexOf(level); }

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

async function request(url, options) {
  const res = await fetch(url, options);
  if (res.ok) return res;
  const body = await res.json().catch(() => null);
  throw new Error(body && body.error ? body.error.message : 'HTTP ' + res.status);
}
async function api(url, options) { return (await request(url, options)).json(); }
function postJson(url, body) {
  return request(url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
}

function baseName(path) { return path.split('/').pop(); }
function folderOf(path) {
  const at = path.lastIndexOf('/');
  return at <= 0 ? '/' : path.slice(0, at);
}
function fixed(v, n) { return typeof v === 'number' ? v.toFixed(n) : '–'; }
function fileSize(b) {
  if (b >= 1 << 20) return (b / (1 << 20)).toFixed(1) + ' MiB';
  if (b >= 1024) return (b / 1024).toFixed(1) + ' KiB';
  return b + ' B';
}

// A short note for everyone (and screen readers) at the top of the page.
function notice(text) { $('notice').textContent = text; }

// ---------------------------------------------------------------- clipboard

// The clipboard API where the page may use it (localhost is a secure
// context), else a selected textarea and the copy command, else a prompt
// the user copies from.
async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch (e) { /* not allowed here: fall back */ }
  const area = el('textarea', { value: text, readOnly: true, className: 'visually-hidden' });
  document.body.append(area);
  area.select();
  let ok = false;
  try { ok = document.execCommand('copy'); } catch (e) { ok = false; }
  area.remove();
  if (!ok) window.prompt('Copy the path:', text);
  return ok;
}

// ------------------------------------------------------------------- cards

function thumb(id, path, size) {
  return el('img', { alt: baseName(path), loading: 'lazy', src: '/api/images/' + id + '/thumbnail' + (size ? '?size=' + size : '') });
}

function levelBadge(level) {
  return el('span', { className: 'level level-' + level, title: LEVEL_TEXT[level] || level,
    textContent: level === 'none' ? 'no match' : level });
}

// A picture's card: its thumbnail (a link searching by it), the lines
// given, its name, its folder and a button copying its full path.
function card(o) {
  const c = el('div', { className: 'card ' + (o.cls || '') });
  c.dataset.id = o.id;
  c.dataset.path = o.path;
  if (o.level) c.dataset.level = o.level;
  if (o.before) c.append(o.before);
  c.append(el('a', { className: 'thumb', href: '#/similar/' + o.id, title: 'search by ' + baseName(o.path) }, thumb(o.id, o.path)));
  const badges = el('div', { className: 'badges' });
  if (o.keeper) badges.append(el('span', { className: 'keep', textContent: 'keep' }));
  if (o.reference) badges.append(el('span', { className: 'reference', textContent: 'reference', title: 'in a reference folder: always kept' }));
  if (o.level) badges.append(levelBadge(o.level));
  if (badges.childElementCount) c.append(badges);
  for (const l of o.lines || []) c.append(l);
  c.append(el('div', { className: 'name', textContent: baseName(o.path), title: o.path }));
  c.append(el('div', { className: 'folder', textContent: folderOf(o.path), title: o.path }));
  const copy = el('button', { type: 'button', className: 'copy-path', textContent: 'Copy path', title: o.path });
  copy.setAttribute('aria-label', 'Copy the path of ' + baseName(o.path));
  copy.addEventListener('click', async () => {
    const ok = await copyText(o.path);
    notice(ok ? 'Copied ' + o.path : 'Copy the path from the dialog: ' + o.path);
  });
  c.append(copy);
  return c;
}

// Hides the cards under `root` below level `min` ('none': every card).
function filterCards(root, min) {
  for (const c of root.querySelectorAll('.card')) {
    c.hidden = min !== 'none' && !(c.dataset.level && levelRank(c.dataset.level) >= levelRank(min));
  }
}

// ------------------------------------------------------------------ search

function k() { return Math.max(1, Math.min(100, parseInt($('k').value, 10) || 12)); }

// What the verified geometry says about a match, in a few words: mirrored,
// rotated, scaled, and how much of the hit the query shows.
function evidenceText(e) {
  if (!e || !e.verified) return '';
  const words = [];
  if (e.identical) words.push('same bytes');
  if (e.mirrored) words.push('mirrored');
  if (typeof e.rotation === 'number' && Math.abs(e.rotation) >= 2) words.push('rotated ' + Math.round(e.rotation) + '°');
  if (typeof e.scale === 'number' && Math.abs(e.scale - 1) >= 0.05) words.push('scaled ×' + e.scale.toFixed(2));
  if (Array.isArray(e.overlap) && e.overlap[1] < 0.9) words.push('covers ' + Math.round(e.overlap[1] * 100) + ' % of it');
  return words.join(' · ');
}

function hitCard(h, queryKey) {
  const meta = el('div', { className: 'meta' },
    el('span', { className: 'rank', textContent: '#' + h.rank + ' ' }),
    'score ' + fixed(h.score, 4));
  const detail = el('div', { className: 'meta', textContent:
    'VLAD ' + fixed(h.similarity, 3) + ' · colour ' + fixed(h.colour, 3) +
    ' · inliers ' + (h.inliers === undefined ? '–' : h.inliers) +
    (h.thumbnail === undefined ? '' : ' · thumbnail ' + fixed(h.thumbnail, 3)) });
  const match = el('a', { className: 'match-link', href: '#/match/' + queryKey + '/' + h.id, textContent: 'why? matches' });
  const how = evidenceText(h.evidence);
  const lines = how ? [meta, detail, el('div', { className: 'evidence', textContent: how }), match] : [meta, detail, match];
  const matched = typeof h.level === 'string' ? h.level !== 'none' : h.inliers >= 8;
  const c = card({ id: h.id, path: h.path, level: h.level, lines, cls: matched ? 'verified' : '' });
  c.dataset.rank = h.rank;
  return c;
}

function showResults(data, queryKey) {
  state.lastResults = { data, queryKey };
  const withLevels = data.results.some((h) => typeof h.level === 'string');
  const matches = withLevels ? data.results.filter((h) => h.level !== 'none') : data.results;
  const nearest = withLevels ? data.results.filter((h) => h.level === 'none') : [];
  $('matches-title').textContent = withLevels ? 'Matches' : 'Results';
  $('matches').replaceChildren(...matches.map((h) => hitCard(h, queryKey)));
  $('nearest').replaceChildren(...nearest.map((h) => hitCard(h, queryKey)));
  $('matches-section').hidden = false;
  applySearchFilter();
  const warn = data.warning ? ' (' + data.warning + ')' : '';
  const self = data.self_rank ? ' The image itself (#' + data.self_rank + ') is left out.' : '';
  const counts = withLevels
    ? matches.length + (matches.length === 1 ? ' match' : ' matches') + ' and ' + nearest.length + ' nearest, not matches'
    : data.results.length + ' results';
  state.searches += 1;
  $('search-status').dataset.searches = String(state.searches);
  setStatus('search-status', counts + ' in ' + fixed(data.seconds, 2) + ' s' + warn + '.' + self);
}

function applySearchFilter() {
  const min = $('level-filter').value;
  filterCards($('results'), min);
  $('nearest-section').hidden = !$('nearest').childElementCount || min !== 'none';
  const shown = [...$('matches').children].filter((c) => !c.hidden).length;
  $('no-matches').hidden = !state.lastResults || shown > 0;
}

function clearResults() {
  $('matches-section').hidden = true;
  $('no-matches').hidden = true;
  $('matches').replaceChildren();
  $('nearest').replaceChildren();
  $('nearest-section').hidden = true;
  state.lastResults = null;
}

// Runs the current query with the current k; a request for the same query
// and k already on its way is not sent twice (Enter also fires 'change').
async function runSearch() {
  const q = state.query;
  if (!q) return;
  const count = k();
  const key = (q.kind === 'id' ? 'id:' + q.id : 'upload:' + q.serial) + ':' + count;
  if (state.inflight === key) return;
  state.inflight = key;
  const seq = ++state.searchSeq;
  setStatus('search-status', 'Searching…');
  try {
    let data;
    if (q.kind === 'upload') {
      const form = new FormData();
      form.append('image', q.file, q.file.name);
      form.append('k', String(count));
      data = await api('/api/search', { method: 'POST', body: form });
    } else {
      data = await api('/api/images/' + q.id + '/similar?k=' + count);
      if (seq === state.searchSeq) $('query-name').textContent = data.query;
    }
    if (seq === state.searchSeq) showResults(data, q.kind === 'id' ? String(q.id) : 'upload');
  } catch (e) {
    if (seq === state.searchSeq) setStatus('search-status', 'Search failed: ' + e.message, true);
  } finally {
    if (state.inflight === key) state.inflight = null;
  }
}

function searchUpload(file) {
  if (state.query && state.query.url) URL.revokeObjectURL(state.query.url);
  const url = URL.createObjectURL(file);
  state.query = { kind: 'upload', file, url, serial: ++state.uploads };
  $('query').replaceChildren(el('img', { src: url, alt: 'the query: ' + file.name }),
    el('div', { id: 'query-name', className: 'name', textContent: file.name }));
  clearResults();
  if (location.hash !== '#/search') history.replaceState(null, '', '#/search');
  show('search');
  return runSearch();
}

function searchIndexed(id) {
  show('search');
  if (state.query && state.query.kind === 'id' && state.query.id === id && state.lastResults) return;
  state.query = { kind: 'id', id };
  $('query').replaceChildren(thumb(id, 'the query'), el('div', { id: 'query-name', className: 'name' }));
  clearResults();
  return runSearch();
}

// An image pasted anywhere on the page (Ctrl+V of a copied picture or file).
function onPaste(e) {
  const items = e.clipboardData ? [...e.clipboardData.items] : [];
  const item = items.find((i) => i.kind === 'file' && i.type.startsWith('image/'));
  if (!item) return;
  const blob = item.getAsFile();
  if (!blob) return;
  e.preventDefault();
  const name = blob.name && blob.name !== 'image.png' ? blob.name : 'pasted image';
  searchUpload(new File([blob], name, { type: blob.type }));
}

// ------------------------------------------------------------------- match

function loadImage(src) {
  return new Promise((resolve, reject) => {
    const img = new Image();
    img.onload = () => resolve(img);
    img.onerror = () => reject(new Error('could not load ' + src));
    img.src = src;
  });
}

// Draws the two pictures side by side and MAX_LINES of the inlier lines, or
// all of them once the toggle says so.
function drawMatch(all) {
  const m = state.match;
  const canvas = $('match-canvas');
  const h = 480, gap = 16;
  const wa = Math.round(m.ia.naturalWidth * h / m.ia.naturalHeight);
  const wb = Math.round(m.ib.naturalWidth * h / m.ib.naturalHeight);
  canvas.width = wa + gap + wb;
  canvas.height = h;
  const ctx = canvas.getContext('2d');
  ctx.fillStyle = '#111';
  ctx.fillRect(0, 0, canvas.width, h);
  ctx.drawImage(m.ia, 0, 0, wa, h);
  ctx.drawImage(m.ib, wa + gap, 0, wb, h);
  ctx.lineWidth = 1.2;
  const lines = m.data.lines;
  // Evenly spaced over the list, so a capped drawing still spans the match.
  const shown = all || lines.length <= MAX_LINES ? lines
    : Array.from({ length: MAX_LINES }, (_, i) => lines[Math.floor(i * lines.length / MAX_LINES)]);
  shown.forEach((l, i) => {
    ctx.strokeStyle = 'hsl(' + ((i * 47) % 360) + ', 90%, 55%)';
    ctx.beginPath();
    ctx.moveTo(l[0] * wa, l[1] * h);
    ctx.lineTo(wa + gap + l[2] * wb, l[3] * h);
    ctx.stroke();
  });
  canvas.dataset.lines = String(shown.length);
  canvas.dataset.total = String(lines.length);
  canvas.dataset.gapX = String(wa);  // the strip between the pictures, which only lines cross
  canvas.dataset.gapWidth = String(gap);
  const button = $('match-all-lines');
  button.hidden = lines.length <= MAX_LINES;
  button.textContent = all ? 'Draw ' + MAX_LINES + ' lines' : 'Draw all ' + lines.length + ' lines';
  button.setAttribute('aria-pressed', all ? 'true' : 'false');
  m.all = all;
}

async function showMatch(a, b) {
  show('match');
  const canvas = $('match-canvas');
  // The pair drawn (or failed) last, and its line counts: gone until this
  // pair is drawn, so nothing reads the previous pair's.
  for (const key of ['pair', 'lines', 'total']) delete canvas.dataset[key];
  $('match-all-lines').hidden = true;
  canvas.getContext('2d').clearRect(0, 0, canvas.width, canvas.height);
  setStatus('match-status', 'Matching…');
  try {
    let data, srcA;
    if (a === 'upload') {
      const q = state.query;
      if (!q || q.kind !== 'upload') throw new Error('upload an image first: the query is kept in this page only');
      const form = new FormData();
      form.append('image', q.file, q.file.name);
      data = await api('/api/matches/' + b, { method: 'POST', body: form });
      srcA = q.url;
    } else {
      data = await api('/api/images/' + a + '/matches/' + b);
      srcA = '/api/images/' + a + '/thumbnail?size=640';
    }
    const [ia, ib] = await Promise.all([loadImage(srcA), loadImage('/api/images/' + b + '/thumbnail?size=640')]);
    state.match = { data, ia, ib, all: false };
    drawMatch(false);
    canvas.dataset.pair = a + '/' + b;
    const name = data.a.path || data.a.query;
    const capped = data.lines.length > MAX_LINES ? ' (' + MAX_LINES + ' of the lines drawn)' : '';
    setStatus('match-status', data.inliers + ' inliers of ' + data.matches + ' matches' +
      (data.verified ? ' (verified)' : ' (not enough to count as verified)') + ': ' +
      baseName(name) + ' ↔ ' + baseName(data.b.path) + capped);
    canvas.setAttribute('aria-label', baseName(name) + ' and ' + baseName(data.b.path) + ', joined at ' + data.inliers + ' matching points');
  } catch (e) {
    canvas.dataset.lines = canvas.dataset.total = '0';
    canvas.dataset.pair = a + '/' + b;
    setStatus('match-status', 'Match failed: ' + e.message, true);
  }
}

// -------------------------------------------------------------- duplicates

// The level of member `id` with the group's keeper, as dedup says it: the
// member's own field, else the pair's, else "identical" for the same bytes.
function memberLevel(g, id) {
  const m = g.members.find((x) => x.id === id);
  if (m && typeof m.level === 'string') return m.level;
  const a = Math.min(id, g.keep), b = Math.max(id, g.keep);
  const p = (g.pairs || []).find((x) => x.id_a === a && x.id_b === b);
  if (p && typeof p.level === 'string') return p.level;
  if (p && p.identical) return 'identical';
  return undefined;
}

// A group's level: its own field, else the weakest of its members'.
function groupLevel(g) {
  if (typeof g.level === 'string') return g.level;
  let weakest;
  for (const m of g.members) {
    if (m.id === g.keep) continue;
    const l = memberLevel(g, m.id);
    if (l === undefined) return undefined;
    if (weakest === undefined || levelRank(l) < levelRank(weakest)) weakest = l;
  }
  return weakest;
}

// A member in a reference folder (`--keep-in`): kept, never offered for
// removal.
function isReference(m) { return m.role === 'reference'; }
function removable(g, m) { return m.id !== g.keep && !isReference(m); }

function keepReason(g) {
  const keeper = g.members.find((m) => m.id === g.keep) || {};
  return keeper.keep_reason || keeper.reason || g.keep_reason || '';
}

function memberCard(g, m) {
  const isKeeper = m.id === g.keep;
  const name = baseName(m.path);
  const box = el('input', { type: 'checkbox', className: 'select', checked: state.selected.has(m.id),
    disabled: !!g.not_duplicates || isReference(m) });
  box.dataset.id = m.id;
  box.setAttribute('aria-label', 'choose ' + name + ' for removal' + (isKeeper ? ' (the keeper)' : ''));
  box.addEventListener('change', () => {
    if (box.checked) state.selected.add(m.id); else state.selected.delete(m.id);
    selectionChanged();
  });
  const choose = el('label', { className: 'choose' }, box,
    isReference(m) ? ' kept: in a reference folder' : isKeeper ? ' remove (the keeper)' : ' remove');
  const lines = [el('div', { className: 'meta', textContent: m.width + '×' + m.height + ' px · ' + fileSize(m.bytes) })];
  if (isKeeper) {
    const reason = keepReason(g);
    lines.push(el('div', { className: 'keep-reason', textContent: 'kept' + (reason ? ': ' + reason : '') }));
  } else {
    if (m.reason) lines.push(el('div', { className: 'member-reason', textContent: m.reason }));
    lines.push(el('div', { className: 'meta', textContent: 'score ' + fixed(m.score, 3) }));
    lines.push(el('a', { className: 'match-link', href: '#/match/' + g.keep + '/' + m.id, textContent: 'why? matches with the keeper' }));
  }
  return card({ id: m.id, path: m.path, level: isKeeper ? undefined : memberLevel(g, m.id),
    lines, keeper: isKeeper, reference: isReference(m), cls: isKeeper ? 'keeper' : '', before: choose });
}

function groupElement(g) {
  const level = groupLevel(g);
  const title = el('h3', { id: 'group-' + g.group + '-title', textContent: 'Group ' + g.group + ' · ' + g.members.length + ' images' });
  if (level) title.append(' · ', levelBadge(level));
  const but = el('button', { type: 'button', className: 'select-but-keeper', textContent: 'Select all but the keeper', disabled: !!g.not_duplicates });
  but.addEventListener('click', () => {
    for (const m of g.members) if (removable(g, m)) state.selected.add(m.id); else state.selected.delete(m.id);
    refreshGroup(g, '.select-but-keeper');
  });
  const dismiss = el('button', { type: 'button', className: 'not-duplicates',
    textContent: g.not_duplicates ? 'They are duplicates after all' : 'Not duplicates' });
  dismiss.setAttribute('aria-pressed', g.not_duplicates ? 'true' : 'false');
  dismiss.addEventListener('click', () => markNotDuplicates(g, !g.not_duplicates));
  const note = el('span', { className: 'dismissed-note', textContent: g.not_duplicates ? 'Marked not duplicates: remembered for this database, left out of exports.' : '' });
  const box = el('section', { className: 'group' + (g.not_duplicates ? ' dismissed' : '') },
    title, el('div', { className: 'group-actions' }, but, dismiss, note),
    el('div', { className: 'row' }, ...g.members.map((m) => memberCard(g, m))));
  box.setAttribute('aria-labelledby', title.id);
  box.dataset.group = g.group;
  if (level) box.dataset.level = level;
  if (g.not_duplicates) box.dataset.notDuplicates = 'true';
  return box;
}

// Draws group `g` again in place, keeping the focus on the control that
// had it (`focus`: a selector inside the group).
function refreshGroup(g, focus) {
  const old = document.querySelector('#groups .group[data-group="' + g.group + '"]');
  const next = groupElement(g);
  if (old) old.replaceWith(next); else $('groups').append(next);
  applyGroupFilter();
  selectionChanged();
  if (focus) { const f = next.querySelector(focus); if (f) f.focus(); }
}

async function markNotDuplicates(g, value) {
  try {
    await postJson('/api/dedup/not-duplicates', { ids: g.members.map((m) => m.id), not_duplicates: value });
    g.not_duplicates = value;
    if (value) for (const m of g.members) state.selected.delete(m.id);
    refreshGroup(g, '.not-duplicates');
    notice('Group ' + g.group + (value ? ' marked not duplicates.' : ' is offered as duplicates again.'));
  } catch (e) {
    notice('Group ' + g.group + ' was not changed: ' + e.message);
  }
}

function visibleGroups() {
  if (!state.dedup) return [];
  const min = $('dup-level-filter').value;
  return state.dedup.groups.filter((g) => {
    const l = groupLevel(g);
    return min === 'none' || (l !== undefined && levelRank(l) >= levelRank(min));
  });
}

function applyGroupFilter() {
  const shown = new Set(visibleGroups().map((g) => String(g.group)));
  for (const box of document.querySelectorAll('#groups .group')) box.hidden = !shown.has(box.dataset.group);
}

// The chosen images of the groups shown and not marked, in group order.
function selection() {
  const ids = [];
  for (const g of visibleGroups())
    if (!g.not_duplicates) for (const m of g.members) if (state.selected.has(m.id) && !isReference(m)) ids.push(m.id);
  return ids;
}

function selectionChanged() {
  const n = selection().length;
  $('selection-status').textContent = n + (n === 1 ? ' image' : ' images') + ' chosen for removal';
  $('selection-status').dataset.count = String(n);
}

async function showDuplicates() {
  show('duplicates');
  const box = $('groups');
  if (!state.dedup) {
    box.replaceChildren();
    setStatus('dup-status', 'Comparing every image with its most similar ones…');
    try {
      state.dedup = await api('/api/dedup');
      for (const g of state.dedup.groups) if (g.keep === undefined) g.keep = g.keeper_id;
    } catch (e) {
      setStatus('dup-status', 'Failed: ' + e.message, true);
      return;
    }
  }
  const d = state.dedup;
  box.replaceChildren(...d.groups.map(groupElement));
  applyGroupFilter();
  selectionChanged();
  const marked = d.groups.filter((g) => g.not_duplicates).length;
  const what = d.mode ? d.mode + (d.level ? ' (level ' + d.level + ' or above)' : '') : 'near-duplicates';
  const rule = d.keep_rule ? '; the keeper chosen by the rule "' + d.keep_rule + '"' : '';
  setStatus('dup-status', d.groups.length + (d.groups.length === 1 ? ' group' : ' groups') +
    ' of ' + what + ' among ' + d.images + ' images' + rule +
    (marked ? ', ' + marked + ' marked not duplicates' : '') +
    '. Choose what to remove, then export the list or a script to read and run.' +
    (d.review_error ? ' Review marks could not be read: ' + d.review_error : ''), !!d.review_error);
}

function selectAllButKeepers() {
  for (const g of visibleGroups()) {
    if (g.not_duplicates) continue;
    for (const m of g.members) if (removable(g, m)) state.selected.add(m.id); else state.selected.delete(m.id);
  }
  for (const c of document.querySelectorAll('#groups input.select')) c.checked = state.selected.has(+c.dataset.id);
  selectionChanged();
}

function selectNone() {
  state.selected.clear();
  for (const c of document.querySelectorAll('#groups input.select')) c.checked = false;
  selectionChanged();
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

async function exportSelection(format) {
  const ids = selection();
  if (!ids.length) {
    notice('Choose images first: tick their boxes, or "Select all but the keepers".');
    return;
  }
  try {
    const text = await (await postJson('/api/dedup/export', { ids, format })).text();
    if (format === 'script') download('lookalike-remove.sh', 'text/x-shellscript', text);
    else download('lookalike-remove.txt', 'text/plain', text);
    notice('Exported ' + ids.length + (ids.length === 1 ? ' path' : ' paths') + (format === 'script' ? ' as a script: read it, uncomment what to remove, then run it.' : ' as a list.'));
  } catch (e) {
    notice('Export failed: ' + e.message);
  }
}

function exportDuplicates(kind) {
  if (!state.dedup) return;
  if (kind === 'json') {
    download('duplicates.json', 'application/json', JSON.stringify(state.dedup.groups, null, 1));
    return;
  }
  const rows = [['group', 'keep', 'id', 'path', 'width', 'height', 'bytes', 'score', 'level', 'not_duplicates']];
  state.dedup.groups.forEach((g) => g.members.forEach((m) =>
    rows.push([g.group, m.id === g.keep ? 1 : 0, m.id, m.path, m.width, m.height, m.bytes, m.score,
      m.id === g.keep ? '' : memberLevel(g, m.id) || '', g.not_duplicates ? 1 : 0])));
  download('duplicates.csv', 'text/csv', rows.map((r) => r.map(csvField).join(',')).join('\n') + '\n');
}

// -------------------------------------------------------------- collection

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
    $('info').replaceChildren(...rows.map(([key, v]) => el('tr', {}, el('th', { scope: 'row', textContent: key }), el('td', { textContent: String(v) }))));
    const list = await api('/api/images?offset=' + page * PAGE + '&limit=' + PAGE);
    const pages = Math.max(1, Math.ceil(list.total / PAGE));
    setStatus('page-status', 'page ' + (page + 1) + ' of ' + pages + ' · ' + list.total + ' images');
    $('prev').disabled = page <= 0;
    $('next').disabled = page + 1 >= pages;
    $('images').replaceChildren(...list.images.map((m) => card({ id: m.id, path: m.path,
      lines: [el('div', { className: 'meta', textContent: m.width + '×' + m.height + ' px · ' + fileSize(m.bytes) })] })));
  } catch (e) {
    setStatus('page-status', 'Failed: ' + e.message, true);
  }
}

// ----------------------------------------------------------------- routing

function show(view) {
  for (const v of ['search', 'match', 'duplicates', 'collection']) $('view-' + v).hidden = v !== view;
  for (const v of ['search', 'duplicates', 'collection']) {
    const active = v === view || (v === 'search' && view === 'match');
    $('nav-' + v).classList.toggle('active', active);
    if (active) $('nav-' + v).setAttribute('aria-current', 'page'); else $('nav-' + v).removeAttribute('aria-current');
  }
}

function route() {
  const parts = location.hash.replace(/^#\/?/, '').split('/');
  if (parts[0] === 'similar' && /^\d+$/.test(parts[1])) return searchIndexed(parts[1]);
  if (parts[0] === 'match' && /^(\d+|upload)$/.test(parts[1]) && /^\d+$/.test(parts[2])) return showMatch(parts[1], parts[2]);
  if (parts[0] === 'duplicates') return showDuplicates();
  if (parts[0] === 'collection') return showCollection(/^\d+$/.test(parts[1]) ? parseInt(parts[1], 10) : 0);
  show('search');
}

// After a move to another page, the keyboard starts at its heading.
function routeAndFocus() {
  route();
  const view = [...document.querySelectorAll('main > section')].find((s) => !s.hidden);
  const heading = view && view.querySelector('h2');
  if (heading) heading.focus();
}

document.addEventListener('DOMContentLoaded', () => {
  const file = $('file');
  file.addEventListener('change', () => {
    const f = file.files[0];
    // Cleared, so picking the same file again is a change and searches again.
    file.value = '';
    if (f) searchUpload(f);
  });
  const drop = $('drop');
  drop.addEventListener('dragover', (e) => { e.preventDefault(); drop.classList.add('over'); });
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', (e) => {
    e.preventDefault();
    drop.classList.remove('over');
    if (e.dataTransfer.files[0]) searchUpload(e.dataTransfer.files[0]);
  });
  document.addEventListener('paste', onPaste);
  // Enter in the form searches again here; it never reloads the page.
  $('upload-form').addEventListener('submit', (e) => { e.preventDefault(); runSearch(); });
  $('k').addEventListener('change', runSearch);
  $('level-filter').addEventListener('change', applySearchFilter);
  $('dup-level-filter').addEventListener('change', () => { applyGroupFilter(); selectionChanged(); });
  $('select-all-but-keepers').addEventListener('click', selectAllButKeepers);
  $('select-none').addEventListener('click', selectNone);
  $('export-list').addEventListener('click', () => exportSelection('list'));
  $('export-script').addEventListener('click', () => exportSelection('script'));
  $('export-json').addEventListener('click', () => exportDuplicates('json'));
  $('export-csv').addEventListener('click', () => exportDuplicates('csv'));
  $('match-all-lines').addEventListener('click', () => { if (state.match) drawMatch(!state.match.all); });
  $('prev').addEventListener('click', () => { location.hash = '#/collection/' + Math.max(0, state.page - 1); });
  $('next').addEventListener('click', () => { location.hash = '#/collection/' + (state.page + 1); });
  window.addEventListener('hashchange', routeAndFocus);
  route();
});

// Tessera Stage: a small product on the ESM bundle. Every permission is the relay's call:
// buttons are offered by role for convenience, and every refusal is shown as a sentence.
import { Sdk, SdkError, ErrorCode } from '/dist/tessera.browser.mjs';

const $ = (id) => document.getElementById(id);
function h(tag, props = {}, ...children) {
  const node = Object.assign(document.createElement(tag), props);
  node.append(...children.filter((c) => c !== null && c !== undefined));
  return node;
}

// ---- errors as sentences ---------------------------------------------------------------
const SENTENCES = {
  [ErrorCode.INVALID_TOKEN]: 'Your access has expired or is not valid. Log in again.',
  [ErrorCode.INVALID_API_KEY]: 'This application is not accepted by the relay.',
  [ErrorCode.INVALID_PERMISSIONS]: 'Your role does not allow that.',
  [ErrorCode.UNAUTHORIZED_ROOM]: 'Your access is for another room.',
  [ErrorCode.UNAUTHORIZED_PARTICIPANT]: 'You are already in this room elsewhere, or were removed from it.',
  [ErrorCode.INVALID_ENTRY_CLAIM]: 'This access cannot both moderate and wait in the lobby.',
  [ErrorCode.ENTRY_DENIED]: 'A moderator turned your request down.',
  [ErrorCode.ENTRY_TIMEOUT]: 'Nobody let you in in time. Try again later.',
  [ErrorCode.ENTRY_CANCELLED]: 'You stopped waiting.',
  [ErrorCode.CONNECTION_FAILED]: 'The service cannot be reached right now.',
  [ErrorCode.CONNECTION_LOST]: 'The connection was lost.',
  [ErrorCode.TIMEOUT]: 'The service did not answer in time.',
  [ErrorCode.PAYLOAD_TOO_LARGE]: 'That is too large to send.',
  [ErrorCode.RATE_LIMITED]: 'Slow down a little.',
  [ErrorCode.NOT_CONNECTED]: 'You are no longer in the room.',
  [ErrorCode.ROOM_ENDED]: 'The room has ended.',
};
const DISCONNECTS = {
  removed: 'A moderator removed you from the room.',
  'room-ended': 'The room has ended.',
  'duplicate-identity': 'You joined this room from somewhere else.',
  denied: 'A moderator did not let you back in after the connection dropped.',
  'server-shutdown': 'The service is restarting. Please join again in a moment.',
  'connection-lost': 'The connection was lost.',
};
function toast(message, kind = 'error') {
  const node = h('div', { className: `toast ${kind}`, textContent: message });
  $('toasts').append(node);
  setTimeout(() => node.remove(), 6000);
}
function showError(err) {
  if (err instanceof SdkError) toast(`${SENTENCES[err.code] ?? err.message} (${err.code})`);
  else toast(String(err?.message ?? err));
}
const guard = (fn) => async (...args) => {
  try {
    await fn(...args);
  } catch (err) {
    showError(err);
  }
};

// ---- joining -----------------------------------------------------------------------------
async function api(path, body) {
  const res = await fetch(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const data = await res.json();
  if (!res.ok) throw new Error(data.error ?? res.statusText);
  return data;
}

let room = null;
let waiting = null;

// After a session ends the page starts afresh, keeping who you are and where you were, and
// saying why it ended; nothing rejoins by itself (a removed guest stays out).
const saved = JSON.parse(sessionStorage.getItem('tessera-stage') ?? '{}');
if (saved.name) $('name').value = saved.name;
if (saved.room) $('room').value = saved.room;
if (saved.role) document.querySelector(`input[name=role][value="${saved.role}"]`)?.click();
if (saved.ended) {
  $('ended').hidden = false;
  $('ended-reason').textContent = saved.ended;
  sessionStorage.setItem('tessera-stage', JSON.stringify({ ...saved, ended: undefined }));
}

/** The relay's HTTP origin: output URLs (the HLS playlist) are relative to it. */
let relayHttp = location.origin;

$('join-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const role = new FormData(event.target).get('role');
  $('ended').hidden = true;
  sessionStorage.setItem('tessera-stage', JSON.stringify({ name: $('name').value, room: $('room').value, role }));
  $('join-button').disabled = true;
  try {
    await api('/api/login', { name: $('name').value, password: $('password').value });
    const { token, url, name, rtmp } = await api('/api/token', { room: $('room').value, role });
    // the local RTMP server npm start runs, if any: the livestream works out of the box
    if (rtmp && !$('rtmp-url').value) $('rtmp-url').value = rtmp;
    relayHttp = url.replace(/^ws/, 'http');
    $('rtmp-hint').hidden = Boolean(rtmp);
    waiting = new AbortController();
    room = await Sdk.join({ url, token, name, signal: waiting.signal, onWaiting: () => ($('waiting').hidden = false) });
    enter(room, role);
  } catch (err) {
    showError(err);
  } finally {
    $('join-button').disabled = false;
    $('waiting').hidden = true;
    waiting = null;
  }
});
$('cancel-wait').onclick = () => waiting?.abort();
$('leave').onclick = () => room?.leave();

// ---- the room ----------------------------------------------------------------------------
function enter(room, role) {
  window.room = room;
  audience = audienceNames(room);
  document.body.classList.toggle('moderator', room.localParticipant.grant.canModerate);
  $('join-screen').hidden = true;
  $('room-screen').hidden = false;
  $('room-bar').hidden = false;
  $('room-name').textContent = `# ${room.id}`;
  $('controls').hidden = room.localParticipant.isViewer;

  const counts = ({ speaker, viewer, total }) => {
    $('c-speaker').textContent = speaker;
    $('c-viewer').textContent = viewer;
    $('c-total').textContent = total;
    $('audience-count').textContent = `(${viewer})`;
  };
  counts(room.participantCount);
  room.on('participant-count-changed', counts);

  stage(room);
  chat(room);
  people(room);
  lobby(room);
  outputs(room);
  captions(room);
  hlsViewer(room);
  files(room);
  whiteboard(room);

  // a dropped connection is retried by the SDK; a guest's rejoin may wait for a moderator again
  room.on('reconnecting', () => toast('Connection lost: reconnecting…', 'info'));
  room.on('reconnect-waiting', () => toast('Reconnecting: waiting for a moderator to let you back in.', 'info'));
  room.on('reconnected', () => toast('Reconnected.', 'info'));
  room.on('disconnected', ({ reason }) => {
    const why = reason === 'left' ? 'You left the room.' : (DISCONNECTS[reason] ?? `Disconnected (${reason}).`);
    const state = JSON.parse(sessionStorage.getItem('tessera-stage') ?? '{}');
    sessionStorage.setItem('tessera-stage', JSON.stringify({ ...state, ended: why }));
    location.reload();
  });
  if (role === 'speaker' || role === 'guest' || role === 'moderator') toast(`Welcome, ${room.localParticipant.name}. Turn your camera on when you are ready.`, 'info');
}

// ---- stage: tiles, publishing, speaking indicator -----------------------------------------
function stage(room) {
  const tiles = $('tiles');
  const tileOf = (id, name) => {
    let tile = document.getElementById(`tile-${id}`);
    if (!tile) {
      tile = h('div', { className: 'tile', id: `tile-${id}` }, h('div', { className: 'avatar', textContent: name.slice(0, 1).toUpperCase() }), h('video', { autoplay: true, muted: true, playsInline: true, hidden: true }), h('div', { className: 'label' }, h('span', { className: 'name', textContent: name })));
      tiles.append(tile);
    }
    return tile;
  };
  const setVideo = (tile, track) => {
    const video = tile.querySelector('video');
    video.srcObject = track ? new MediaStream([track]) : null;
    video.hidden = !track;
    tile.querySelector('.avatar').hidden = Boolean(track);
  };
  const setMuted = (tile, source, muted) => {
    const label = tile.querySelector('.label');
    label.querySelector(`[data-muted="${source}"]`)?.remove();
    if (!muted) return;
    const badge = h('span', { className: 'muted-badge', textContent: source === 'microphone' ? 'mic off' : `${source} off` });
    badge.dataset.muted = source;
    label.append(badge);
  };
  // a speaking indicator: the audio level of a track, read with Web Audio
  const context = window.AudioContext ? new AudioContext() : null;
  const listen = (tile, track) => {
    if (!context) return () => {};
    const source = context.createMediaStreamSource(new MediaStream([track]));
    const analyser = context.createAnalyser();
    analyser.fftSize = 256;
    source.connect(analyser);
    const data = new Uint8Array(analyser.frequencyBinCount);
    const timer = setInterval(() => {
      analyser.getByteFrequencyData(data);
      const level = data.reduce((a, b) => a + b, 0) / data.length;
      tile.classList.toggle('speaking', level > 18);
    }, 150);
    return () => {
      clearInterval(timer);
      source.disconnect();
      tile.classList.remove('speaking');
    };
  };
  const audio = new Map();
  const me = room.localParticipant;
  if (!me.isViewer) tileOf('me', `${me.name} (you)`);
  room.on('participant-joined', ({ participant }) => tileOf(participant.id, participant.name));
  // a screen share is a tile of its own, beside its sharer's camera
  const screenTile = (id, label) => {
    const tile = tileOf(`${id}-screen`, label);
    tile.classList.add('screen');
    return tile;
  };
  room.on('participant-left', ({ participant }) => {
    document.getElementById(`tile-${participant.id}`)?.remove();
    document.getElementById(`tile-${participant.id}-screen`)?.remove();
  });
  room.on('track-subscribed', ({ participant, publication, track }) => {
    const tile = publication.source === 'screen' ? screenTile(participant.id, `${participant.name}'s screen`) : tileOf(participant.id, participant.name);
    if (track.kind === 'video') {
      setVideo(tile, track);
      publication.setPreferredSize({ maxWidth: tile.clientWidth || 320, maxHeight: tile.clientHeight || 200 }).catch(() => {});
    } else {
      const element = h('audio', { autoplay: true });
      element.srcObject = new MediaStream([track]);
      audio.set(participant.id, { element, stop: listen(tile, track) });
    }
    setMuted(tile, publication.source, publication.muted);
  });
  room.on('track-unsubscribed', ({ participant, publication }) => {
    if (publication.source === 'screen') return document.getElementById(`tile-${participant.id}-screen`)?.remove();
    const tile = document.getElementById(`tile-${participant.id}`);
    if (!tile) return;
    if (publication.kind === 'video') setVideo(tile, null);
    else {
      audio.get(participant.id)?.stop();
      audio.delete(participant.id);
    }
  });
  // a screen share has its own tile: its badge goes there, not on the camera's
  const tileOfPublication = (participant, publication) => document.getElementById(publication.source === 'screen' ? `tile-${participant.id}-screen` : `tile-${participant.id}`);
  for (const name of ['track-muted', 'track-unmuted']) {
    room.on(name, ({ participant, publication }) => {
      const tile = tileOfPublication(participant, publication);
      if (tile) setMuted(tile, publication.source, publication.muted);
    });
  }
  room.on('track-subscription-failed', ({ error }) => showError(error));
  room.on('unpublish-requested', ({ source, by }) => {
    if (confirm(`${by} asks you to stop your ${source}. Stop it?`)) me.unpublish(source).catch(showError);
  });
  room.on('local-track-unpublished', ({ publication, reason, by, error }) => {
    if (reason === 'failed') toast(`Your ${publication.source} stopped reaching the room: ${error?.message ?? 'the connection failed'}.`);
    document.querySelector(`[data-source="${publication.source}"]`)?.setAttribute('aria-pressed', 'false');
    if (publication.source === 'camera') setVideo(tileOf('me', me.name), null);
    if (publication.source === 'screen') document.getElementById('tile-me-screen')?.remove();
    if (publication.source === 'microphone') $('mute-mic').hidden = true;
    if (reason === 'force-unpublished') toast(`${by} stopped your ${publication.source}.`, 'info');
  });
  // a publish takes a moment (it resolves once the relay has the track): a second click meanwhile waits for it
  const inFlight = new Set();
  for (const button of document.querySelectorAll('#controls [data-source]')) {
    button.onclick = guard(async () => {
      const source = button.dataset.source;
      if (inFlight.has(source)) return;
      if (me.tracks.has(source)) return me.unpublish(source);
      inFlight.add(source);
      button.setAttribute('aria-busy', 'true');
      let publication;
      try {
        publication = await me.publish(source);
      } finally {
        inFlight.delete(source);
        button.removeAttribute('aria-busy');
      }
      button.setAttribute('aria-pressed', 'true');
      if (source === 'camera') setVideo(tileOf('me', me.name), publication.track);
      if (source === 'screen') setVideo(screenTile('me', 'Your screen'), publication.track);
      if (source === 'microphone') {
        $('mute-mic').hidden = false;
        audio.set('me', { stop: listen(tileOf('me', me.name), publication.track) });
      }
    });
  }
  $('mute-mic').onclick = guard(async () => {
    const mic = me.tracks.get('microphone');
    if (!mic) return;
    await (mic.muted ? mic.unmute() : mic.mute());
    $('mute-mic').textContent = mic.muted ? 'Unmute' : 'Mute';
    setMuted(tileOf('me', me.name), 'microphone', mic.muted);
  });
}

// ---- names: only the ones the room vouches for -------------------------------------------
// A chat message's `from` is stamped by the relay; its payload is whatever the sender wrote, a
// `name` of "Mo" included. A sender is named as the room names it: the roster (the stage) or
// an audience page (viewers). Until then its message shows the claimed name marked unverified,
// with the start of its id, and is renamed once the room names it.
const known = new Map();
const renames = new Map(); // id → what to redraw once the room names it
let audience = null; // set on entering a room: looks unnamed senders up in the audience pages

function vouch(id, name) {
  known.set(id, name);
  const waiting = renames.get(id);
  renames.delete(id);
  for (const redraw of waiting ?? []) redraw();
}
const unverified = (id, claimed) => `${typeof claimed === 'string' && claimed.trim() ? `“${claimed.trim().slice(0, 64)}”` : 'someone'} (unverified · ${id.slice(0, 6)})`;
const nameOf = (id, claimed) => known.get(id) ?? unverified(id, claimed);

/** Draw now with `nameOf`, and again once the room names `id` (looked up in the audience pages). */
function whenNamed(id, redraw) {
  redraw();
  if (known.has(id)) return;
  if (!renames.has(id)) renames.set(id, new Set());
  renames.get(id).add(redraw);
  audience?.lookUp(id);
}

/**
 * Unnamed senders are looked up in the audience, a walk of its pages for every id asked for in
 * the meantime (history asks for many at once), one walk at a time. An id the walk did not find
 * (its viewer left, or sat past the pages a walk reads) stays unverified: never asked again.
 */
function audienceNames(room) {
  const PAGE = 500;
  const MAX_PAGES = 8;
  const asked = new Set();
  const given = new Set();
  let walking = null;
  const walk = async () => {
    await null; // ids asked in the same turn (a history) go in this walk
    const wanted = new Set(asked);
    asked.clear();
    let cursor = null;
    let pages = 0;
    try {
      do {
        const page = await room.getParticipants({ tier: 'viewer', limit: PAGE, cursor });
        for (const viewer of page.participants) {
          vouch(viewer.id, viewer.name);
          wanted.delete(viewer.id);
        }
        cursor = page.nextCursor;
      } while (cursor && wanted.size > 0 && ++pages < MAX_PAGES);
    } catch {
      // the names stay unverified, which the messages say; a refusal is no news to the reader
    }
    for (const id of wanted) given.add(id);
    walking = asked.size > 0 ? walk() : null;
  };
  return {
    lookUp(id) {
      const onStage = room.remoteParticipants.get(id);
      if (onStage) return vouch(id, onStage.name);
      if (known.has(id) || given.has(id) || room.localParticipant.id === id) return;
      asked.add(id);
      walking ??= walk();
    },
  };
}

// ---- chat: pubsub with history and direct messages ---------------------------------------
/** Offer `id` as a direct-message target and pick it. */
function messageTo(id, name) {
  vouch(id, name);
  const select = $('chat-to');
  if (![...select.options].some((o) => o.value === id)) select.append(h('option', { value: id, textContent: name }));
  select.value = id;
  document.querySelector('[role=tab][data-tab="chat"]')?.click();
  $('chat-text').focus();
}

async function chat(room) {
  const list = $('messages');
  const me = room.localParticipant.id;
  // a payload is anything its sender chose, not necessarily an object
  const bodyOf = (payload) => (payload && typeof payload === 'object' ? payload : {});
  const show = ({ from, payload: raw, timestamp }) => {
    const payload = bodyOf(raw);
    const to = Array.isArray(payload.to) && typeof payload.to[0] === 'string' ? payload.to[0] : null;
    const label = h('span', { className: 'from' });
    const draw = () => {
      const who = from === me ? 'You' : nameOf(from, payload.name);
      label.textContent = to ? `${who} → ${to === me ? 'you' : nameOf(to)} (privately)` : who;
      label.classList.toggle('unverified', from !== me && !known.has(from));
    };
    if (from === me) draw();
    else whenNamed(from, draw);
    if (to && to !== me) whenNamed(to, draw);
    list.append(h('li', { className: to ? 'direct' : '', title: new Date(timestamp).toLocaleTimeString() }, label, String(payload.text ?? '')));
    list.scrollTop = list.scrollHeight;
  };
  const refreshTargets = () => {
    const select = $('chat-to');
    const picked = select.value;
    const stage = [...room.remoteParticipants.values()].map((p) => h('option', { value: p.id, textContent: p.name }));
    const viewers = [...select.options].filter((o) => o.value && !room.remoteParticipants.has(o.value) && o.dataset.viewer);
    select.replaceChildren(h('option', { value: '', textContent: 'Everyone' }), ...stage, ...viewers);
    select.value = [...select.options].some((o) => o.value === picked) ? picked : '';
  };
  room.on('participant-joined', ({ participant }) => {
    vouch(participant.id, participant.name);
    refreshTargets();
  });
  room.on('participant-left', refreshTargets);
  // listening before anything is awaited: a message typed the moment the room shows is sent, not a page reload
  $('chat-form').addEventListener('submit', guard(async (event) => {
    event.preventDefault();
    const text = $('chat-text').value.trim();
    if (!text) return;
    const to = $('chat-to').value;
    const payload = { text, name: room.localParticipant.name, ...(to ? { to: [to] } : {}) };
    const sent = await room.pubsub.publish('chat', payload, { persist: true, ...(to ? { to: [to] } : {}) });
    show({ from: me, payload, timestamp: sent.timestamp });
    $('chat-text').value = '';
  }));
  try {
    await room.pubsub.subscribe('chat', (m) => {
      // someone who wrote to you privately can be answered privately
      if (Array.isArray(bodyOf(m.payload).to) && !room.remoteParticipants.has(m.from)) addViewerTarget(m.from, bodyOf(m.payload).name);
      show(m);
    });
    for (const m of await room.pubsub.getHistory('chat', { limit: 50 })) show(m);
  } catch (err) {
    showError(err);
  }
}

/** Offer a viewer who wrote to you privately as a target, under the name the room gives it. */
function addViewerTarget(id, claimed) {
  const select = $('chat-to');
  if ([...select.options].some((o) => o.value === id)) return;
  const option = h('option', { value: id });
  option.dataset.viewer = 'yes';
  whenNamed(id, () => (option.textContent = `${nameOf(id, claimed)} (audience)`));
  select.append(option);
}

// ---- people: the stage, the audience page by page, moderation -----------------------------
function people(room) {
  const stageList = $('stage-list');
  const row = (participant) => {
    const actions = room.localParticipant.grant.canModerate
      ? [
          h('button', { className: 'ghost', textContent: 'Ask to stop camera', onclick: guard(() => participant.requestUnpublish('camera')) }),
          h('button', { className: 'ghost', textContent: 'Stop camera', onclick: guard(() => participant.forceUnpublish('camera')) }),
          h('button', { className: 'ghost', textContent: 'Remove', onclick: guard(() => participant.remove()) }),
        ]
      : [];
    return h('li', { id: `person-${participant.id}` }, h('span', { textContent: participant.name }), h('span', {}, ...actions));
  };
  room.on('participant-joined', ({ participant }) => stageList.append(row(participant)));
  room.on('participant-left', ({ participant }) => document.getElementById(`person-${participant.id}`)?.remove());
  const viewerRow = (viewer) => {
    const item = h('li', { id: `viewer-${viewer.id}` });
    const remove = room.localParticipant.grant.canModerate
      ? h('button', { className: 'ghost', textContent: 'Remove', onclick: guard(async () => {
          await room.remove(viewer.id);
          item.remove();
          toast(`${viewer.name} was removed.`, 'info');
        }) })
      : null;
    const message = room.localParticipant.isViewer ? null : h('button', { className: 'ghost', textContent: 'Message', onclick: () => {
      addViewerTarget(viewer.id, viewer.name);
      messageTo(viewer.id, viewer.name);
    } });
    item.append(h('span', { textContent: viewer.name }), h('span', {}, message, remove));
    return item;
  };
  // The audience is paged, never pushed: the list is the pages asked for so far. Loads and
  // relists run one at a time, in order, so a page never lands in a list rebuilt meanwhile.
  const PAGE = 50;
  let cursor = null; // where "Load more" goes on
  let shown = 0; // pages listed: a relist lists as many again
  let queue = Promise.resolve();
  const serial = (op) => (queue = queue.then(op).catch(showError));
  const settle = () => {
    $('load-more').textContent = cursor ? 'Load more' : 'Everyone is listed';
    $('load-more').disabled = !cursor;
  };
  const loadMore = () => serial(async () => {
    if (shown > 0 && !cursor) return;
    const page = await room.getParticipants({ tier: 'viewer', limit: PAGE, cursor });
    for (const viewer of page.participants) {
      vouch(viewer.id, viewer.name);
      if (!document.getElementById(`viewer-${viewer.id}`)) $('audience-list').append(viewerRow(viewer));
    }
    cursor = page.nextCursor;
    shown++;
    settle();
  });
  /** List the first `pages` pages again, replacing the list once they are all in. */
  const relist = async (pages) => {
    const rows = [];
    let next = null;
    let listed = 0;
    do {
      const page = await room.getParticipants({ tier: 'viewer', limit: PAGE, cursor: next });
      for (const viewer of page.participants) {
        vouch(viewer.id, viewer.name);
        rows.push(viewerRow(viewer));
      }
      next = page.nextCursor;
      listed++;
    } while (next && listed < pages);
    $('audience-list').replaceChildren(...rows);
    cursor = next;
    shown = listed;
    settle();
  };
  $('load-more').onclick = loadMore;
  // start again from the first page
  $('refresh-audience').onclick = () => serial(() => relist(1));
  // Once listed, the list follows the audience: a change of the viewer count (a join, a leave, a
  // removal by another moderator or the server API) lists the pages shown again. The relay
  // already coalesces counts (one change per window); one relist waits at most, for every
  // change made while another runs.
  let viewers = room.participantCount.viewer;
  let relistWaiting = false;
  room.on('participant-count-changed', ({ viewer }) => {
    if (viewer === viewers) return;
    viewers = viewer;
    if (shown === 0 || relistWaiting) return;
    relistWaiting = true;
    serial(() => {
      relistWaiting = false;
      return relist(shown);
    });
  });
  if (room.localParticipant.grant.canModerate) {
    const end = h('button', { className: 'ghost', textContent: 'End the room for everyone', onclick: guard(async () => confirm('End the room for everyone?') && room.end()) });
    $('load-more').after(end);
  }
}

// ---- lobby ---------------------------------------------------------------------------------
function lobby(room) {
  const list = $('lobby-list');
  const update = () => {
    const n = room.lobby.pending.length;
    $('lobby-badge').hidden = n === 0;
    $('lobby-badge').textContent = n;
    $('lobby-empty').hidden = n > 0;
  };
  room.on('lobby-request', ({ participantId, name }) => {
    list.append(h('li', { id: `lobby-${participantId}` }, h('span', { textContent: name }), h('span', {}, h('button', { textContent: 'Admit', onclick: guard(() => room.lobby.admit(participantId)) }), h('button', { className: 'ghost', textContent: 'Deny', onclick: guard(() => room.lobby.deny(participantId)) }))));
    update();
    toast(`${name} is waiting in the lobby.`, 'info');
  });
  room.on('lobby-resolved', ({ participantId }) => {
    document.getElementById(`lobby-${participantId}`)?.remove();
    update();
  });
  $('admit-all').onclick = guard(() => room.lobby.admit(room.lobby.pending.map((r) => r.participantId)));
  update();
}

// ---- outputs -------------------------------------------------------------------------------
function outputs(room) {
  const names = { recording: 'Recording', hls: 'HLS', livestream: 'RTMP livestream', transcription: 'Transcription', whiteboard: 'Whiteboard' };
  const render = () => {
    $('outputs').replaceChildren(
      ...Object.entries(names).map(([output, label]) => {
        const control = room[output];
        const { state, by, info, error } = control.status;
        const active = state === 'active';
        const where = active && info ? (info.playlist ?? info.url ?? info.server ?? '') : '';
        return h('li', {}, h('span', { textContent: label, title: where }), h('span', { className: `state ${state}`, title: error?.message ?? (by ? `by ${by}` : ''), textContent: state }), h('button', {
          className: active ? 'ghost' : '',
          textContent: active ? 'Stop' : 'Start',
          disabled: state === 'starting' || state === 'stopping',
          onclick: guard(() => (active ? control.stop() : control.start(output === 'livestream' ? { url: $('rtmp-url').value } : {}))),
        }));
      }),
    );
    $('board-panel').hidden = room.whiteboard.state !== 'active';
  };
  const recordings = guard(async () => {
    if (!room.localParticipant.grant.canModerate) return;
    const res = await fetch(`/api/recordings?room=${encodeURIComponent(room.id)}`);
    if (!res.ok) return;
    const { recordings: files } = await res.json();
    const byRecording = new Map();
    for (const f of files) byRecording.set(f.recording, [...(byRecording.get(f.recording) ?? []), f]);
    $('recordings').replaceChildren(
      ...[...byRecording].map(([id, list]) =>
        h('li', {}, h('span', { textContent: id }), h('span', {}, ...list.map((f) => h('a', { href: f.url, download: '', textContent: f.file, title: `${Math.ceil(f.size / 1024)} KB` })))),
      ),
    );
    $('recordings-empty').hidden = files.length > 0;
  });
  room.on('output-changed', ({ output, state, by, error }) => {
    render();
    if (output === 'recording' && state === 'stopped') recordings();
    if (state === 'failed' && error) toast(`${names[output]} failed: ${error.message}`);
    else if (state === 'active' || state === 'stopped') toast(`${names[output]} ${state === 'active' ? 'started' : 'stopped'}${by ? ` by ${by}` : ''}.`, 'info');
  });
  render();
  recordings();
}

// ---- live transcription: each utterance as a caption under its speaker's tile ----------------
function captions(room) {
  const timers = new Map();
  room.on('transcription', ({ participantId, text }) => {
    const tile = document.getElementById(participantId === room.localParticipant.id ? 'tile-me' : `tile-${participantId}`);
    if (!tile) return;
    let caption = tile.querySelector('.caption');
    if (!caption) tile.append((caption = h('div', { className: 'caption' })));
    caption.textContent = text;
    clearTimeout(timers.get(participantId));
    timers.set(participantId, setTimeout(() => caption.remove(), 8000));
  });
}

// ---- the room's HLS, played in the page with hls.js ----------------------------------------
function hlsViewer(room) {
  const video = $('hls-video');
  let player = null;
  const close = () => {
    player?.destroy();
    player = null;
    video.hidden = true;
    $('hls-watch').textContent = 'Watch';
  };
  // the playlist reaches members allowed to see it (canSubscribe or canHls); it is relative to the relay
  const playlist = () => {
    const { state, info } = room.hls.status;
    return state === 'active' && info?.playlist ? new URL(info.playlist, relayHttp).href : null;
  };
  const update = () => {
    $('hls-panel').hidden = !playlist();
    if (!playlist()) close();
  };
  $('hls-watch').onclick = guard(async () => {
    if (player) return close();
    if (!window.Hls) {
      await new Promise((resolve, reject) => document.head.append(h('script', { src: '/vendor/hls.min.js', onload: resolve, onerror: () => reject(new Error('hls.js did not load')) })));
    }
    if (!window.Hls.isSupported()) throw new Error('this browser cannot play HLS through Media Source Extensions');
    // one segment behind the live edge: about 2 segments (4 s) of delay with the relay's 2 s segments
    player = new window.Hls({ liveSyncDurationCount: 1, liveMaxLatencyDurationCount: 4 });
    player.on(window.Hls.Events.ERROR, (_, data) => data.fatal && (toast(`HLS: ${data.details}`), close()));
    player.loadSource(playlist());
    player.attachMedia(video);
    video.hidden = false;
    $('hls-watch').textContent = 'Close';
    await video.play().catch(() => undefined);
  });
  room.on('output-changed', ({ output }) => output === 'hls' && update());
  update();
}

// ---- files: data streams ---------------------------------------------------------------
function files(room) {
  const list = $('files');
  $('file-form').addEventListener('submit', guard(async (event) => {
    event.preventDefault();
    const file = $('file').files[0];
    if (!file) return;
    const bar = $('file-progress');
    bar.hidden = false;
    await room.dataStream.send(file, { topic: 'files', onProgress: ({ sent, total }) => (bar.value = total ? sent / total : 1) });
    bar.hidden = true;
    list.append(h('li', {}, h('span', { textContent: `You shared ${file.name}` })));
  }));
  room.dataStream.on('stream', guard(async (stream) => {
    // streams of other topics are not this page's: let them go (the relay sends no more of them)
    if (stream.topic !== 'files') return stream.cancel();
    const item = h('li', {}, h('span', { textContent: `${stream.name ?? 'a file'} from ${room.remoteParticipants.get(stream.from)?.name ?? 'someone'} (${Math.ceil(stream.size / 1024)} KB)…` }));
    list.append(item);
    // readBlob gathers the file in memory, within the room's allowance for unread bytes (64 MiB):
    // a larger one would be refused; say so rather than fail (an app that wants more raises
    // room.dataStream.maxUnreadBytes, or writes the chunks to disk as they come with for await)
    if (stream.size > room.dataStream.maxUnreadBytes) {
      stream.cancel();
      return item.append(h('span', { textContent: ' too large to receive here' }));
    }
    const blob = await stream.readBlob();
    item.append(h('a', { href: URL.createObjectURL(blob), download: stream.name ?? 'file', textContent: 'Download' }));
  }));
}

// ---- whiteboard ----------------------------------------------------------------------------
function whiteboard(room) {
  const canvas = $('board');
  const ctx = canvas.getContext('2d');
  const draw = (shape) => {
    if (shape.kind !== 'stroke') return;
    ctx.strokeStyle = shape.color ?? '#3452d8';
    ctx.lineWidth = shape.width ?? 3;
    ctx.beginPath();
    for (let i = 0; i < shape.points.length; i += 2) (i ? ctx.lineTo : ctx.moveTo).call(ctx, shape.points[i], shape.points[i + 1]);
    ctx.stroke();
  };
  const load = guard(async () => {
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    if (room.whiteboard.state === 'active') for (const shape of await room.whiteboard.getShapes()) draw(shape);
  });
  room.on('whiteboard-shape', ({ shape }) => draw(shape));
  room.on('whiteboard-cleared', () => ctx.clearRect(0, 0, canvas.width, canvas.height));
  room.on('output-changed', ({ output, state }) => output === 'whiteboard' && state === 'active' && load());
  let points = null;
  const at = (e) => {
    const r = canvas.getBoundingClientRect();
    return [Math.round(((e.clientX - r.left) / r.width) * canvas.width), Math.round(((e.clientY - r.top) / r.height) * canvas.height)];
  };
  canvas.onpointerdown = (e) => (points = at(e));
  canvas.onpointermove = (e) => {
    if (!points || points.length >= 3998) return;
    points.push(...at(e));
  };
  canvas.onpointerup = guard(async () => {
    const stroke = points;
    points = null;
    if (stroke && stroke.length >= 4) await room.whiteboard.draw({ kind: 'stroke', points: stroke, color: '#3452d8', width: 3 });
  });
  $('board-clear').onclick = guard(() => room.whiteboard.clear());
  load();
}

// ---- tabs ----------------------------------------------------------------------------------
for (const tab of document.querySelectorAll('[role=tab]')) {
  tab.onclick = () => {
    for (const t of document.querySelectorAll('[role=tab]')) t.setAttribute('aria-selected', String(t === tab));
    for (const panel of document.querySelectorAll('[data-panel]')) panel.hidden = panel.dataset.panel !== tab.dataset.tab;
  };
}

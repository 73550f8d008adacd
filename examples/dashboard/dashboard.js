// The dashboard page: everything goes through the token server (dashboard.mjs), which holds
// the API secret and asks the relay with RoomService; names and ids are shown as text only.
const $ = (id) => document.getElementById(id);
const state = { room: null, tier: 'speaker', cursor: null, roomsCursor: null, lastEvent: 0 };

async function api(path, body) {
  const res = await fetch(path, body === undefined ? {} : { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const data = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(data.error ?? `HTTP ${res.status}`);
  return data;
}

function item(text, ...children) {
  const li = document.createElement('li');
  const label = document.createElement('span');
  label.textContent = text;
  li.append(label, ...children);
  return li;
}

function button(text, onClick) {
  const b = document.createElement('button');
  b.type = 'button';
  b.textContent = text;
  b.addEventListener('click', onClick);
  return b;
}

async function loadRooms(more = false) {
  const page = await api(`/api/dashboard/rooms${more && state.roomsCursor ? `?cursor=${encodeURIComponent(state.roomsCursor)}` : ''}`);
  if (!more) $('rooms').replaceChildren();
  for (const room of page.rooms) {
    const li = item(`${room.roomId} — ${room.counts.speaker} on stage, ${room.counts.viewer} watching${room.lobby ? `, ${room.lobby} waiting` : ''}${room.outputs.recording.state !== 'stopped' ? `, recording ${room.outputs.recording.state}` : ''}`, button('Open', () => openRoom(room.roomId)));
    li.dataset.room = room.roomId;
    if (room.roomId === state.room) li.classList.add('selected');
    $('rooms').append(li);
  }
  if (page.rooms.length === 0 && !more) $('rooms').append(item('No open rooms.'));
  state.roomsCursor = page.nextCursor;
  $('more-rooms').hidden = !page.nextCursor;
}

async function openRoom(roomId) {
  state.room = roomId;
  $('room-name').textContent = roomId;
  $('end').hidden = false;
  $('room-error').textContent = '';
  for (const li of $('rooms').children) li.classList.toggle('selected', li.dataset.room === roomId);
  await Promise.all([loadParticipants(false), loadRecordings()]);
}

async function loadParticipants(more) {
  if (!state.room) return;
  const query = new URLSearchParams({ room: state.room, tier: state.tier });
  if (more && state.cursor) query.set('cursor', state.cursor);
  try {
    const page = await api(`/api/dashboard/participants?${query}`);
    if (!more) $('participants').replaceChildren();
    for (const p of page.participants) {
      const li = item(`${p.name} (${p.id})`, button('Remove', () => remove(p.id)));
      li.dataset.participant = p.id;
      $('participants').append(li);
    }
    if (!more && page.participants.length === 0) $('participants').append(item(state.tier === 'viewer' ? 'Nobody in the audience.' : 'Nobody on stage.'));
    state.cursor = page.nextCursor;
    $('more-participants').hidden = !page.nextCursor;
  } catch (err) {
    $('room-error').textContent = err.message;
  }
}

async function loadRecordings() {
  const { recordings } = await api(`/api/dashboard/recordings?room=${encodeURIComponent(state.room)}`).catch(() => ({ recordings: [] }));
  $('recordings').replaceChildren(...recordings.map((r) => {
    const a = document.createElement('a');
    a.href = r.url;
    a.textContent = `${r.recording}/${r.file}`;
    return item('', a);
  }));
  if (recordings.length === 0) $('recordings').append(item('No recordings.'));
}

async function remove(participantId) {
  try {
    await api('/api/dashboard/remove', { room: state.room, participantId });
  } catch (err) {
    $('room-error').textContent = err.message;
  }
  await loadParticipants(false);
}

async function pollEvents() {
  try {
    const { events } = await api(`/api/dashboard/events?after=${state.lastEvent}`);
    for (const e of events) {
      state.lastEvent = Math.max(state.lastEvent, e.seq);
      const who = e.data?.participant?.id ?? e.data?.participantId ?? (e.data?.output ? `${e.data.output} ${e.data.state}` : '');
      const li = item(`${new Date(e.createdAt).toLocaleTimeString()} ${e.event} ${e.roomId}${who ? ` ${who}` : ''}`);
      li.dataset.event = e.event;
      $('events').prepend(li);
    }
    if (events.length > 0) await loadRooms();
  } catch {
    // the next poll tries again
  }
  setTimeout(pollEvents, 1000);
}

$('login').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  try {
    await api('/api/login', { name: $('name').value, password: $('password').value });
  } catch (err) {
    $('login-error').textContent = err.message;
    return;
  }
  $('login').hidden = true;
  $('dashboard').hidden = false;
  await loadRooms();
  void pollEvents();
});
$('refresh').addEventListener('click', () => loadRooms());
$('more-rooms').addEventListener('click', () => loadRooms(true));
$('more-participants').addEventListener('click', () => loadParticipants(true));
for (const b of document.querySelectorAll('.tier')) {
  b.addEventListener('click', () => {
    state.tier = b.dataset.tier;
    void loadParticipants(false);
  });
}
$('end').addEventListener('click', async () => {
  try {
    await api('/api/dashboard/end', { room: state.room });
  } catch (err) {
    $('room-error').textContent = err.message;
  }
  state.room = null;
  $('room-name').textContent = '(pick one)';
  $('end').hidden = true;
  $('participants').replaceChildren();
  await loadRooms();
});

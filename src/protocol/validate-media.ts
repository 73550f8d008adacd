/** Parsers of the media methods. */
import { SOURCES, type Source } from './grant.ts';
import type { Method } from './messages.ts';
import type { LayerInfo, PreferredSize } from './media.ts';
import { bad, isId, isRecord, ok, type Parsed, type ParamsParser } from './parse.ts';

type MediaMethod = Extract<Method, `media.${string}`>;

const MAX_SDP = 64 * 1024;
/** One track per transport: an offer or answer needs one media section; a few more are slack. */
const MAX_MEDIA_SECTIONS = 4;
/** A browser's offer for one track is a couple of hundred lines. */
const MAX_SDP_LINES = 1000;
/** Simulcast layers (`a=rid`) of all sections: at most 4 a track; werift matches each against every other (990 took 33–60 ms). */
const MAX_RIDS = 16;
/**
 * Codecs (`a=rtpmap`) of one section, and feedback lines (`a=rtcp-fb`) in all and with a wildcard
 * payload type. werift gives every codec of a section each of its wildcard feedback lines, and
 * each feedback line of a payload type to every codec of that type: 490 codecs and 490 wildcard
 * lines (23 KiB, under every other limit) made 233,280 objects, 150–350 ms a parse, and it parses
 * an answer twice. A browser offers about 40 codecs (with their retransmission types) and 5
 * feedback lines for each video codec, and no wildcard.
 */
const MAX_CODECS = 128;
const MAX_FEEDBACK = 512;
const MAX_WILDCARD_FEEDBACK = 8;
const isSource = (v: unknown): v is Source => SOURCES.includes(v as Source);

/** The payload type written at `at` (1–3 digits, at most 127, then a space), or -1. */
function payloadType(v: string, at: number): number {
  let n = 0;
  let digits = 0;
  for (; digits < 4; digits++) {
    const c = v.charCodeAt(at + digits);
    if (c < 0x30 || c > 0x39) break;
    n = n * 10 + (c - 0x30);
  }
  return digits >= 1 && digits <= 3 && n <= 127 && v.charCodeAt(at + digits) === 0x20 ? n : -1;
}

/**
 * An SDP the relay may hand to its WebRTC stack: bounded in bytes, lines and media sections,
 * since parsing and matching cost grows faster than linearly with the sections; and only audio
 * and video sections (werift would answer a data channel, whose SCTP reassembly it does not bound).
 */
function isSdp(v: unknown): v is string {
  if (typeof v !== 'string' || !v.startsWith('v=0') || v.length > MAX_SDP) return false;
  let lines = 0;
  let sections = 0;
  let rids = 0;
  let feedback = 0;
  let wildcards = 0;
  /** The payload types of the current section's codecs: one codec each. */
  const types = new Set<number>();
  for (let at = v.indexOf('\n'); at >= 0; at = v.indexOf('\n', at + 1)) {
    if (++lines > MAX_SDP_LINES) return false;
    const line = at + 1;
    if (v.startsWith('a=rid:', line) && ++rids > MAX_RIDS) return false;
    if (v.startsWith('a=rtpmap:', line)) {
      // a payload type werift reads as the number it is: `a=rtpmap: 96` was NaN to it, one type for
      // every such codec, while a count of types saw 96 (`096` is 96 to both)
      const type = payloadType(v, line + 9);
      if (type < 0 || types.has(type) || types.size >= MAX_CODECS) return false;
      types.add(type);
    }
    if (v.startsWith('a=rtcp-fb:', line)) {
      if (++feedback > MAX_FEEDBACK) return false;
      if (v.startsWith('a=rtcp-fb:*', line)) {
        if (++wildcards > MAX_WILDCARD_FEEDBACK) return false;
      } else if (payloadType(v, line + 10) < 0) return false;
    }
    if (!v.startsWith('m=', line)) continue;
    if (++sections > MAX_MEDIA_SECTIONS || !(v.startsWith('m=audio ', line) || v.startsWith('m=video ', line))) return false;
    types.clear();
    wildcards = 0;
  }
  return true;
}
const SOURCE = "source must be 'camera', 'microphone' or 'screen'";
const pixels = (v: unknown): v is number => Number.isInteger(v) && (v as number) > 0 && (v as number) <= 16384;

function size(v: unknown): Parsed<PreferredSize | undefined> {
  if (v === undefined) return ok(undefined);
  if (!isRecord(v) || !pixels(v.maxWidth) || !pixels(v.maxHeight)) return bad('size must be { maxWidth, maxHeight } in pixels');
  return ok({ maxWidth: v.maxWidth, maxHeight: v.maxHeight });
}

function layers(v: unknown): Parsed<LayerInfo[] | undefined> {
  if (v === undefined) return ok(undefined);
  if (!Array.isArray(v) || v.length === 0 || v.length > 4) return bad('layers must list 1 to 4 simulcast layers');
  const out: LayerInfo[] = [];
  for (const l of v) {
    if (!isRecord(l) || typeof l.rid !== 'string' || !/^[a-zA-Z0-9]{1,16}$/.test(l.rid) || !pixels(l.width) || !pixels(l.height)) {
      return bad('each layer is { rid, width, height }');
    }
    out.push({ rid: l.rid, width: l.width, height: l.height });
  }
  return ok(out);
}

export const MEDIA_PARAMS: { [M in MediaMethod]: ParamsParser<M> } = {
  'media.publish': (p) => {
    if (!isSource(p.source)) return bad(SOURCE);
    if (p.kind !== 'audio' && p.kind !== 'video') return bad("kind must be 'audio' or 'video'");
    if (!isSdp(p.sdp)) return bad(`sdp must be an SDP offer of at most ${MAX_SDP} bytes, ${MAX_SDP_LINES} lines, ${MAX_MEDIA_SECTIONS} audio or video media sections, ${MAX_RIDS} simulcast layers, ${MAX_CODECS} codecs a section (one per payload type) and ${MAX_FEEDBACK} feedback lines (${MAX_WILDCARD_FEEDBACK} with a wildcard a section)`);
    const l = layers(p.layers);
    if (!l.ok) return l;
    return ok({ source: p.source, kind: p.kind, sdp: p.sdp, ...(l.value ? { layers: l.value } : {}) });
  },
  'media.unpublish': (p) => (isSource(p.source) ? ok({ source: p.source }) : bad(SOURCE)),
  'media.mute': (p) => {
    if (!isSource(p.source)) return bad(SOURCE);
    if (typeof p.muted !== 'boolean') return bad('muted must be a boolean');
    return ok({ source: p.source, muted: p.muted });
  },
  'media.subscribe': (p) => {
    if (!isId(p.participantId)) return bad('participantId must be a participant id');
    if (!isSource(p.source)) return bad(SOURCE);
    const s = size(p.size);
    if (!s.ok) return s;
    return ok({ participantId: p.participantId, source: p.source, ...(s.value ? { size: s.value } : {}) });
  },
  'media.layer': (p) => {
    if (!isId(p.subscriptionId)) return bad('subscriptionId must be a subscription id');
    const s = size(p.size);
    if (!s.ok) return s;
    if (!s.value) return bad('size is required');
    return ok({ subscriptionId: p.subscriptionId, size: s.value });
  },
  'media.answer': (p) => {
    if (!isId(p.subscriptionId)) return bad('subscriptionId must be a subscription id');
    if (!isSdp(p.sdp)) return bad('sdp must be an SDP answer');
    return ok({ subscriptionId: p.subscriptionId, sdp: p.sdp });
  },
  'media.unsubscribe': (p) => (isId(p.subscriptionId) ? ok({ subscriptionId: p.subscriptionId }) : bad('subscriptionId must be a subscription id')),
  'media.force-unpublish': (p) => {
    if (!isId(p.participantId)) return bad('participantId must be a participant id');
    if (!isSource(p.source)) return bad(SOURCE);
    return ok({ participantId: p.participantId, source: p.source });
  },
};

/** Parsers of the media methods. */
import { SOURCES, type Source } from './grant.ts';
import type { Method } from './messages.ts';
import { bad, isId, ok, type ParamsParser } from './parse.ts';

type MediaMethod = Extract<Method, `media.${string}`>;

const MAX_SDP = 64 * 1024;
const isSource = (v: unknown): v is Source => SOURCES.includes(v as Source);
const isSdp = (v: unknown): v is string => typeof v === 'string' && v.startsWith('v=0') && v.length <= MAX_SDP;
const SOURCE = "source must be 'camera', 'microphone' or 'screen'";

export const MEDIA_PARAMS: { [M in MediaMethod]: ParamsParser<M> } = {
  'media.publish': (p) => {
    if (!isSource(p.source)) return bad(SOURCE);
    if (p.kind !== 'audio' && p.kind !== 'video') return bad("kind must be 'audio' or 'video'");
    if (!isSdp(p.sdp)) return bad('sdp must be an SDP offer');
    return ok({ source: p.source, kind: p.kind, sdp: p.sdp });
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
    return ok({ participantId: p.participantId, source: p.source });
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

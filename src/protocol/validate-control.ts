/** Parsers of the lobby, moderation-request, output and whiteboard methods. */
import { MAX_LOBBY_DECISIONS, OUTPUTS, type OutputName, type OutputOptions, type OutputStartParams, type ShapeInput } from './control.ts';
import { SOURCES, type Source } from './grant.ts';
import type { Method } from './messages.ts';
import { bad, isId, isRecord, ok, type Parsed, type ParamsParser } from './parse.ts';
import { TRANSCRIPTION_ENGINES, type TranscriptionEngine } from './transcript.ts';

type ControlMethod = Extract<Method, 'lobby.admit' | 'lobby.deny' | 'participant.request-unpublish' | 'output.start' | 'output.stop' | 'whiteboard.draw' | 'whiteboard.clear' | 'whiteboard.shapes'>;

/** Board coordinates and sizes stay within this range. */
export const BOARD_SIZE = 10_000;
const MAX_POINTS = 4000;
const MAX_TEXT = 1000;

function ids(p: Record<string, unknown>): Parsed<{ participantIds: string[] }> {
  const list = p.participantIds;
  if (!Array.isArray(list) || list.length === 0 || list.length > MAX_LOBBY_DECISIONS || !list.every(isId)) {
    return bad(`participantIds must be an array of 1 to ${MAX_LOBBY_DECISIONS} participant ids`);
  }
  return ok({ participantIds: [...new Set(list as string[])] });
}

const isOutput = (v: unknown): v is OutputName => OUTPUTS.includes(v as OutputName);
const coord = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v) && Math.abs(v) <= BOARD_SIZE;
const optionalStyle = (v: unknown, max: number) => v === undefined || (typeof v === 'number' && Number.isFinite(v) && v > 0 && v <= max);
const optionalColor = (v: unknown) => v === undefined || (typeof v === 'string' && /^#[0-9a-fA-F]{3,8}$|^[a-z]{3,20}$/.test(v));

/** Validate a shape, keeping only its known fields. */
export function parseShape(value: unknown): Parsed<ShapeInput> {
  if (!isRecord(value)) return bad('shape must be an object');
  const { kind, color } = value;
  if (!optionalColor(color)) return bad('color must be #rgb, #rrggbb(aa) or a colour name');
  const style = color === undefined ? {} : { color: color as string };
  if (kind === 'stroke') {
    const points = value.points;
    if (!Array.isArray(points) || points.length < 2 || points.length > MAX_POINTS || points.length % 2 !== 0 || !points.every(coord)) {
      return bad(`a stroke has 2 to ${MAX_POINTS} coordinates (x, y pairs) within ±${BOARD_SIZE}`);
    }
    if (!optionalStyle(value.width, 200)) return bad('width must be a number from 0 to 200');
    return ok({ kind, points: points as number[], ...style, ...(value.width === undefined ? {} : { width: value.width as number }) });
  }
  if (kind === 'line' || kind === 'rect' || kind === 'ellipse') {
    if (![value.x, value.y, value.w, value.h].every(coord)) return bad(`x, y, w and h must be numbers within ±${BOARD_SIZE}`);
    if (!optionalStyle(value.width, 200)) return bad('width must be a number from 0 to 200');
    return ok({ kind, x: value.x as number, y: value.y as number, w: value.w as number, h: value.h as number, ...style, ...(value.width === undefined ? {} : { width: value.width as number }) });
  }
  if (kind === 'text') {
    if (![value.x, value.y].every(coord)) return bad(`x and y must be numbers within ±${BOARD_SIZE}`);
    if (typeof value.text !== 'string' || value.text.length === 0 || value.text.length > MAX_TEXT) return bad(`text must be 1 to ${MAX_TEXT} characters`);
    if (!optionalStyle(value.size, 500)) return bad('size must be a number from 0 to 500');
    return ok({ kind, x: value.x as number, y: value.y as number, text: value.text, ...style, ...(value.size === undefined ? {} : { size: value.size as number }) });
  }
  return bad("shape kind must be 'stroke', 'line', 'rect', 'ellipse' or 'text'");
}

/** Refuse option names an output does not have (a typo would otherwise be ignored in silence). */
function only(options: Record<string, unknown>, output: OutputName, known: readonly string[]): Parsed<true> {
  const unknown = Object.keys(options).find((key) => !known.includes(key));
  return unknown === undefined ? ok(true) : bad(`${output} has no option ${JSON.stringify(unknown.slice(0, 64))}${known.length ? ` (its options: ${known.join(', ')})` : ''}`);
}

/** Largest RTMP URL accepted. */
const MAX_URL_LENGTH = 2048;

/** One parser per output of its start options. */
const OPTIONS: { [O in OutputName]: (options: Record<string, unknown>) => Parsed<OutputOptions[O]> } = {
  recording: (o) => {
    const known = only(o, 'recording', []);
    return known.ok ? ok({}) : known;
  },
  whiteboard: (o) => {
    const known = only(o, 'whiteboard', []);
    return known.ok ? ok({}) : known;
  },
  hls: (o) => {
    const known = only(o, 'hls', ['segmentSeconds']);
    if (!known.ok) return known;
    const seconds = o.segmentSeconds;
    if (seconds === undefined) return ok({});
    if (typeof seconds !== 'number' || !(seconds >= 0.5 && seconds <= 30)) return bad('segmentSeconds must be a number from 0.5 to 30');
    return ok({ segmentSeconds: seconds });
  },
  livestream: (o) => {
    const known = only(o, 'livestream', ['url']);
    if (!known.ok) return known;
    if (typeof o.url !== 'string' || o.url.length === 0 || o.url.length > MAX_URL_LENGTH) {
      return bad(`livestream needs { url: "rtmp[s]://host[:port]/app/streamKey" } (at most ${MAX_URL_LENGTH} characters)`);
    }
    return ok({ url: o.url });
  },
  transcription: (o) => {
    const known = only(o, 'transcription', ['language', 'engine']);
    if (!known.ok) return known;
    const options: OutputOptions['transcription'] = {};
    if (o.language !== undefined) {
      if (typeof o.language !== 'string' || !/^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8}){0,2}$/.test(o.language)) return bad('language must be a BCP 47 tag such as "en" or "en-US"');
      options.language = o.language;
    }
    if (o.engine !== undefined) {
      if (!TRANSCRIPTION_ENGINES.includes(o.engine as TranscriptionEngine)) return bad(`engine must be one of ${TRANSCRIPTION_ENGINES.join(', ')}`);
      options.engine = o.engine as TranscriptionEngine;
    }
    return ok(options);
  },
};

export const CONTROL_PARAMS: { [M in ControlMethod]: ParamsParser<M> } = {
  'lobby.admit': ids,
  'lobby.deny': ids,
  'participant.request-unpublish': (p) => {
    if (!isId(p.participantId)) return bad('participantId must be a non-empty string');
    if (!SOURCES.includes(p.source as Source)) return bad("source must be 'camera', 'microphone' or 'screen'");
    return ok({ participantId: p.participantId, source: p.source as Source });
  },
  'output.start': (p) => {
    if (!isOutput(p.output)) return bad(`output must be one of ${OUTPUTS.join(', ')}`);
    if (p.options === undefined) return ok({ output: p.output } as OutputStartParams);
    if (!isRecord(p.options)) return bad('options must be an object');
    const options = OPTIONS[p.output](p.options);
    return options.ok ? ok({ output: p.output, options: options.value } as OutputStartParams) : options;
  },
  'output.stop': (p) => (isOutput(p.output) ? ok({ output: p.output }) : bad(`output must be one of ${OUTPUTS.join(', ')}`)),
  'whiteboard.draw': (p) => {
    const shape = parseShape(p.shape);
    return shape.ok ? ok({ shape: shape.value }) : shape;
  },
  'whiteboard.clear': () => ok({}),
  'whiteboard.shapes': () => ok({}),
};

/**
 * The stage composite as an ffmpeg filter graph: every on-stage video in a grid (each tile
 * labelled with its participant's name), every microphone mixed, H.264 + AAC; a room with no
 * video shows a card with the room's name. Pure: it only builds arguments.
 *
 * The inputs are the streams of one SDP input (input 0): its video streams first, in tile
 * order, then its audio streams. Names reach ffmpeg only through text files the relay writes
 * (`textfile=`), never inside the filter graph, so no name can change the graph.
 */

/** What one composite shows. */
export interface CompositeLayout {
  /** Canvas size (even numbers). */
  width: number;
  height: number;
  fps: number;
  /** One text file per video tile, in tile order: the label drawn on it (written by the caller). */
  labels: readonly string[];
  /** How many audio streams follow the video streams in the input. */
  audios: number;
  /** The text file of the card shown when there is no video (the room's name). */
  roomCard: string;
  /** A TrueType font for the labels; without one, tiles and the card carry no text. */
  font: string | null;
}

/** The filter graph and the labels of its two outputs. */
export interface CompositeGraph {
  filter: string;
  video: string;
  audio: string;
}

const BACKGROUND = '0x15181d';

/** Only paths the relay made itself go into a graph, and they must not need quoting rules. */
function safePath(path: string): string {
  if (!/^[\w/.+-]+$/.test(path)) throw new Error(`not a path for a filter graph: ${JSON.stringify(path)}`);
  return path;
}

/** Columns and rows of a grid holding `n` tiles, as square as it gets (1, 2x1, 2x2, 3x2, 3x3...). */
export function gridOf(n: number): { cols: number; rows: number } {
  const cols = Math.max(1, Math.ceil(Math.sqrt(n)));
  return { cols, rows: Math.max(1, Math.ceil(n / cols)) };
}

const even = (n: number) => Math.max(2, Math.floor(n / 2) * 2);

function label(layout: CompositeLayout, file: string, size: number): string {
  if (!layout.font) return '';
  return `,drawtext=fontfile=${safePath(layout.font)}:textfile=${safePath(file)}:expansion=none:fontsize=${size}:fontcolor=white:box=1:boxcolor=black@0.5:boxborderw=${Math.round(size / 3)}:x=${Math.round(size / 2)}:y=h-th-${Math.round(size / 2)}`;
}

/**
 * Every live stream is stamped with the wall clock as it enters the graph, the clock of the
 * generated picture and silence (`realtime`, `arealtime`) too. Stamped by its input instead
 * (wall clock at arrival, less the input's first packet, which ffmpeg reads while it probes),
 * a live stream ran seconds ahead of a generated one, and ffmpeg, which serves the output
 * furthest behind first, held the live one back by as much: the HLS was 15-36 s late with a
 * camera and no microphone (bench:outputs); now about one segment.
 */
const WALL_CLOCK = 'setpts=(RTCTIME-RTCSTART)/(TB*1000000),';

/** The filter graph of a composite (see the module's comment for the inputs it expects). */
export function compositeGraph(layout: CompositeLayout): CompositeGraph {
  const { width, height, fps } = layout;
  const parts: string[] = [];
  const n = layout.labels.length;
  if (n === 0) {
    const size = Math.round(height / 12);
    // generated, so paced to the wall clock like the live inputs it stands for
    parts.push(`color=c=${BACKGROUND}:s=${width}x${height}:r=${fps}${layout.font ? `,drawtext=fontfile=${safePath(layout.font)}:textfile=${safePath(layout.roomCard)}:expansion=none:fontsize=${size}:fontcolor=white:x=(w-tw)/2:y=(h-th)/2` : ''},format=yuv420p,realtime[vout]`);
  } else {
    const { cols, rows } = gridOf(n);
    const w = even(width / cols);
    const h = even(height / rows);
    const size = Math.max(12, Math.round(h / 14));
    for (let i = 0; i < n; i++) {
      parts.push(
        `[0:v:${i}]${WALL_CLOCK}scale=${w}:${h}:force_original_aspect_ratio=decrease,pad=${w}:${h}:(ow-iw)/2:(oh-ih)/2:color=${BACKGROUND},setsar=1,fps=${fps},format=yuv420p${label(layout, layout.labels[i]!, size)}[t${i}]`,
      );
    }
    if (n === 1) parts.push(`[t0]pad=${width}:${height}:(ow-iw)/2:(oh-ih)/2:color=${BACKGROUND}[vout]`);
    else {
      const cells = Array.from({ length: n }, (_, i) => `${(i % cols) * w}_${Math.floor(i / cols) * h}`).join('|');
      const inputs = Array.from({ length: n }, (_, i) => `[t${i}]`).join('');
      parts.push(`${inputs}xstack=inputs=${n}:layout=${cells}:fill=${BACKGROUND},pad=${width}:${height}:(ow-iw)/2:(oh-ih)/2:color=${BACKGROUND}[vout]`);
    }
  }
  // silence is generated: paced to the wall clock, or it would run ahead of the live video without end
  if (layout.audios === 0) parts.push('anullsrc=r=48000:cl=stereo,arealtime[aout]');
  else {
    // wall-clock timestamps jitter: resampling with async closes the gaps between packets
    const inputs = Array.from({ length: layout.audios }, (_, i) => `[0:a:${i}]a${WALL_CLOCK}aresample=48000:async=1000[a${i}]`);
    parts.push(...inputs);
    const mixed = Array.from({ length: layout.audios }, (_, i) => `[a${i}]`).join('');
    parts.push(layout.audios === 1 ? `[a0]anull[aout]` : `${mixed}amix=inputs=${layout.audios}:normalize=0:dropout_transition=0[aout]`);
  }
  return { filter: parts.join(';'), video: '[vout]', audio: '[aout]' };
}


/** Encoder settings shared by every composite output: H.264 (baseline-friendly, a key frame every 2 s) and AAC. */
export function encoderArgs(fps: number, videoKbps: number): string[] {
  return [
    '-c:v', 'libx264', '-preset', 'veryfast', '-tune', 'zerolatency', '-pix_fmt', 'yuv420p',
    '-b:v', `${videoKbps}k`, '-maxrate', `${videoKbps}k`, '-bufsize', `${videoKbps * 2}k`,
    '-g', String(fps * 2), '-keyint_min', String(fps * 2), '-sc_threshold', '0',
    '-c:a', 'aac', '-b:a', '128k', '-ar', '48000', '-ac', '2',
  ];
}

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { chooseLayer } from './board.ts';

const layers = [
  { rid: 'q', width: 320, height: 180 },
  { rid: 'h', width: 640, height: 360 },
  { rid: 'f', width: 1280, height: 720 },
];
const all = ['q', 'h', 'f'];

describe('chooseLayer', () => {
  it('a single-layer track has the layer ""', () => assert.equal(chooseLayer([], [], { maxWidth: 10, maxHeight: 10 }), ''));
  it('without a size: the largest flowing layer', () => {
    assert.equal(chooseLayer(layers, all), 'f');
    assert.equal(chooseLayer(layers, ['q', 'h']), 'h', 'the top layer is paused');
    assert.equal(chooseLayer(layers, []), 'f', 'nothing flows yet: judge by what was announced');
  });
  it('with a size: the largest layer that fits, with a quarter of slack; else the smallest', () => {
    assert.equal(chooseLayer(layers, all, { maxWidth: 1920, maxHeight: 1080 }), 'f');
    assert.equal(chooseLayer(layers, all, { maxWidth: 640, maxHeight: 360 }), 'h');
    assert.equal(chooseLayer(layers, all, { maxWidth: 520, maxHeight: 300 }), 'h', '640 ≤ 1.25 × 520');
    assert.equal(chooseLayer(layers, all, { maxWidth: 400, maxHeight: 300 }), 'q');
    assert.equal(chooseLayer(layers, all, { maxWidth: 100, maxHeight: 60 }), 'q', 'nothing fits: the smallest');
    assert.equal(chooseLayer(layers, ['q', 'h'], { maxWidth: 1920, maxHeight: 1080 }), 'h', 'only flowing layers');
  });
});

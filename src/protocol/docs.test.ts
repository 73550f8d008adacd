import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { CloseCode, ERROR_REASONS, ErrorCode } from './codes.ts';

describe('docs/errors.md', () => {
  const doc = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');
  it('documents every error code exactly once in the code table', () => {
    for (const code of Object.values(ErrorCode)) {
      const rows = doc.split('\n').filter((line) => line.startsWith(`| \`${code}\` |`));
      assert.equal(rows.length, 1, code);
    }
  });
  it('documents every reason', () => {
    for (const reason of ERROR_REASONS) assert.ok(doc.includes(`\`${reason}\``), reason);
  });
  it('documents every close code', () => {
    for (const [name, code] of Object.entries(CloseCode)) assert.ok(doc.includes(`| ${code} | \`${name}\` |`), name);
  });
});

describe('docs/protocol.md', () => {
  const doc = readFileSync(new URL('../../docs/protocol.md', import.meta.url), 'utf8');
  it('says, in its Compatibility section, what an SDK does with what it does not know', () => {
    const at = doc.indexOf('\n## Compatibility\n');
    assert.ok(at >= 0, 'a Compatibility section');
    const section = doc.slice(at, doc.indexOf('\n## ', at + 1));
    for (const topic of ['frame type', 'event name', 'field', 'canPublishSources', '`tracks`', 'output state', '`info`', "error's code", "error's kind", "error's reason", 'ReceivedError']) {
      assert.ok(section.includes(topic), topic);
    }
    assert.match(section, /`INVALID_STATE` and `INTERNAL_ERROR`[^]*`kind === undefined`/);
  });
});

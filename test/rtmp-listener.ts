import { createServer, type Server, type Socket } from 'node:net';
import { amfDecode, amfEncode, ChunkReader, MessageType, readExactly, writeChunks, type Amf } from '../relay/outputs/rtmp.ts';

/** What a local RTMP listener saw of one publisher. */
export interface Received {
  commands: string[];
  app?: string;
  key?: string;
  data: Amf[][];
}

/** A minimal RTMP server for tests: handshake, connect, createStream, publish, data. */
export async function startRtmpListener(): Promise<{ port: number; sessions: Received[]; sockets: Socket[]; close(): void }> {
  const sessions: Received[] = [];
  const sockets: Socket[] = [];
  const server: Server = createServer(async (socket) => {
    sockets.push(socket);
    socket.on('error', () => {});
    const got: Received = { commands: [], data: [] };
    sessions.push(got);
    const c0c1 = await readExactly(socket, 1537);
    socket.write(Buffer.concat([Buffer.from([3]), Buffer.alloc(1536, 1), c0c1.subarray(1)]));
    await readExactly(socket, 1536);
    const reply = (values: Amf[], streamId = 0) => socket.write(writeChunks({ typeId: MessageType.Command, streamId, timestamp: 0, payload: amfEncode(values) }, 3, 128));
    const reader = new ChunkReader((m) => {
      if (m.typeId === MessageType.Data) return void got.data.push(amfDecode(m.payload));
      if (m.typeId !== MessageType.Command) return;
      const [name, txn, , arg] = amfDecode(m.payload);
      got.commands.push(String(name));
      if (name === 'connect') {
        got.app = String((amfDecode(m.payload)[2] as { app?: string }).app);
        reply(['_result', txn, { fmsVer: 'test' }, { code: 'NetConnection.Connect.Success' }]);
      } else if (name === 'createStream') reply(['_result', txn, null, 1]);
      else if (name === 'publish') {
        got.key = String(arg);
        reply(['onStatus', 0, null, { level: 'status', code: 'NetStream.Publish.Start' }], 1);
      }
    });
    socket.on('data', (d: Buffer) => reader.push(d));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    sessions,
    sockets,
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

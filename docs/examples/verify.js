// A webhook receiver that checks every delivery's signature before it
// trusts the body. Node.js 18+, no packages:
//
//   PARLEY_WEBHOOK_SECRET=whsec_... node verify.js
//
// It listens on 127.0.0.1:$PORT (9000 when PORT is unset; 0 picks a free
// port) and prints the address it took, then one line per delivery.
'use strict';
const crypto = require('node:crypto');
const http = require('node:http');

// How far X-Service-Timestamp may be from this machine's clock, either way,
// before a delivery is refused as a possible replay.
const REPLAY_WINDOW_SECONDS = 300;

// Returns null when the delivery is genuine and fresh, else the reason.
// The signature is "sha256=" and the hex HMAC-SHA256 of "<timestamp>.<body>"
// keyed with the webhook's secret; body is the raw Buffer as received.
function verifySignature(secret, timestamp, signature, body, nowSeconds) {
  const expected = Buffer.from('sha256=' + crypto.createHmac('sha256', secret)
    .update(timestamp + '.').update(body).digest('hex'));
  const given = Buffer.from(signature);
  // timingSafeEqual needs equal lengths; the length tells nothing secret.
  if (given.length !== expected.length || !crypto.timingSafeEqual(given, expected)) {
    return 'bad signature';
  }
  if (!/^\d+$/.test(timestamp)) {
    return 'bad timestamp';
  }
  if (Math.abs(nowSeconds - Number(timestamp)) > REPLAY_WINDOW_SECONDS) {
    return 'stale timestamp';
  }
  return null;
}

const secret = process.env.PARLEY_WEBHOOK_SECRET || '';
const seen = new Set(); // delivery ids already handled; keep them in your database

const server = http.createServer((req, res) => {
  // The signature covers the bytes as sent: collect them before any parsing.
  const chunks = [];
  let size = 0;
  req.on('data', (chunk) => {
    size += chunk.length;
    if (size > 1 << 20) {
      res.writeHead(413).end('body too large');
      req.destroy();
      return;
    }
    chunks.push(chunk);
  });
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    const problem = verifySignature(secret,
      req.headers['x-service-timestamp'] || '',
      req.headers['x-service-signature'] || '',
      body, Date.now() / 1000);
    if (problem) {
      console.error('refused: ' + problem);
      res.writeHead(401, { 'Content-Type': 'text/plain' }).end(problem);
      return;
    }
    // Retries and replays carry the same X-Service-Delivery: answer 2xx
    // every time, act once.
    const delivery = req.headers['x-service-delivery'] || '';
    if (!seen.has(delivery)) {
      seen.add(delivery);
      console.log(`accepted ${req.headers['x-service-event']} ${delivery} ${body.toString('utf8')}`);
    }
    res.writeHead(204).end();
  });
});

if (!secret) {
  console.error('set PARLEY_WEBHOOK_SECRET to the secret PUT /v1/webhook returned');
  process.exit(1);
}
server.listen(Number(process.env.PORT || 9000), '127.0.0.1', () => {
  console.log(`listening on 127.0.0.1:${server.address().port}`);
});

// Parley webchat widget. Served inline in the widget page (the CSP allows
// exactly this script); talks only to its own origin:
//   POST /webchat/{channel}/session   -> {visitor_token, expires_at}  (kept in localStorage)
//   GET  /webchat/{channel}/history   -> {messages}       (oldest first)
//   GET  /webchat/{channel}/events    SSE: ready, message, typing
//   POST /webchat/{channel}/messages  {text, client_message_id, name?, quick_reply_payload?}
//   POST /webchat/{channel}/postbacks {payload, client_message_id, name?}
// The visitor token travels in the X-Visitor-Token header only, never in a
// URL: the event stream is read with fetch, which can send it, rather than
// EventSource, which cannot.
(function () {
  'use strict';

  var root = document.documentElement;
  var channel = root.getAttribute('data-channel');
  var base = '/webchat/' + encodeURIComponent(channel);
  var params = new URLSearchParams(location.search);
  function $(id) { return document.getElementById(id); }
  var log = $('log'), input = $('input'), sendBtn = $('send'), form = $('composer');
  var chips = $('chips'), typing = $('typing'), empty = $('empty'), notice = $('notice');
  var statusEl = $('status'), statusText = $('status-text');

  // Customisation from the embedding page: ?title=&accent=&name=
  var title = (params.get('title') || '').trim().slice(0, 60);
  if (title) { $('chat-title').textContent = title; document.title = title; }
  var accent = params.get('accent') || '';
  if (/^#?([0-9a-f]{3}|[0-9a-f]{6})$/i.test(accent)) {
    root.style.setProperty('--accent', accent.charAt(0) === '#' ? accent : '#' + accent);
  }

  // localStorage may be blocked (third-party storage settings): fall back to
  // memory, which keeps the conversation for this page's life only.
  var store = (function () {
    try {
      var s = window.localStorage, probe = 'parley.probe';
      s.setItem(probe, '1'); s.removeItem(probe);
      return s;
    } catch (e) {
      var m = {};
      return {
        getItem: function (k) { return Object.prototype.hasOwnProperty.call(m, k) ? m[k] : null; },
        setItem: function (k, v) { m[k] = String(v); },
        removeItem: function (k) { delete m[k]; }
      };
    }
  })();
  var tokenKey = 'parley.webchat.' + channel + '.token';
  var renewKey = 'parley.webchat.' + channel + '.renew';
  var nameKey = 'parley.webchat.' + channel + '.name';
  var given = (params.get('name') || '').trim().slice(0, 80);
  if (given) store.setItem(nameKey, given);
  var visitorName = store.getItem(nameKey) || '';
  var token = store.getItem(tokenKey);

  var byId = Object.create(null);
  var typingTimer = 0;

  function newId() {
    if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
    var b = new Uint8Array(16);
    crypto.getRandomValues(b);
    return Array.prototype.map.call(b, function (x) { return (x + 256).toString(16).slice(1); }).join('');
  }

  // --- the server ---

  // A token is renewed (the same visitor, a fresh expiry) once half its life
  // has passed, so a returning visitor keeps their conversation; one that
  // expired gets a new visitor from the same call.
  var sessionPromise = null, renewBackoff = 0;
  function session() {
    var renewAt = Math.max(Number(store.getItem(renewKey)) || 0, renewBackoff);
    if (token && Date.now() < renewAt) return Promise.resolve(token);
    if (!sessionPromise) {
      sessionPromise = request('POST', '/session', {}).then(function (d) {
        token = d.visitor_token;
        store.setItem(tokenKey, token);
        var expires = Date.parse(d.expires_at), now = Date.now();
        store.setItem(renewKey, String(isNaN(expires) ? 0 : now + (expires - now) / 2));
        return token;
      }).catch(function (err) {
        // A renewal refused (too many sessions from here right now): the
        // token may still be good, so it is kept for this page.
        if (token && err.status !== 401) {
          renewBackoff = Date.now() + Math.max(60, err.retryAfter || 0) * 1000;
          return token;
        }
        throw err;
      }).finally(function () { sessionPromise = null; });
    }
    return sessionPromise;
  }

  function request(method, path, body) {
    var headers = { Accept: 'application/json' };
    if (token) headers['X-Visitor-Token'] = token;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    return fetch(base + path, {
      method: method, headers: headers, cache: 'no-store', credentials: 'omit',
      body: body === undefined ? undefined : JSON.stringify(body)
    }).then(function (res) {
      return res.json().catch(function () { return {}; }).then(function (data) {
        if (!res.ok) {
          var err = new Error(data.message || 'HTTP ' + res.status);
          err.status = res.status;
          err.retryAfter = Number(res.headers.get('Retry-After')) || 0;
          throw err;
        }
        return data;
      });
    });
  }

  // call is request with a visitor token; a token the server no longer
  // takes (the channel's secret changed) is replaced once.
  function call(method, path, body) {
    return session().then(function () {
      return request(method, path, body);
    }).catch(function (err) {
      if (err.status !== 401) throw err;
      token = null;
      store.removeItem(tokenKey);
      store.removeItem(renewKey);
      return session().then(function () { return request(method, path, body); });
    });
  }

  // --- rendering ---

  function h(tag, cls, text) {
    var el = document.createElement(tag);
    if (cls) el.className = cls;
    if (text != null) el.textContent = text;
    return el;
  }

  var urlPattern = /\bhttps?:\/\/[^\s<>"]*[^\s<>".,;:!?)\]'}]/g;
  function linkify(el, text) {
    var last = 0, m;
    urlPattern.lastIndex = 0;
    while ((m = urlPattern.exec(text))) {
      if (m.index > last) el.appendChild(document.createTextNode(text.slice(last, m.index)));
      var a = h('a', '', m[0]);
      a.href = m[0]; a.target = '_blank'; a.rel = 'noopener noreferrer';
      el.appendChild(a);
      last = m.index + m[0].length;
    }
    if (last < text.length) el.appendChild(document.createTextNode(text.slice(last)));
  }

  function isHTTPS(u) { return typeof u === 'string' && /^https:\/\//i.test(u); }

  function renderButton(b) {
    if (b.type === 'web_url' && isHTTPS(b.url)) {
      var a = h('a', 'btn link', b.title);
      a.href = b.url; a.target = '_blank'; a.rel = 'noopener noreferrer';
      return a;
    }
    var btn = h('button', 'btn', b.title);
    btn.type = 'button';
    btn.addEventListener('click', function () { tap(b); });
    return btn;
  }

  function renderButtons(list) {
    var box = h('div', 'actions');
    list.slice(0, 3).forEach(function (b) { box.appendChild(renderButton(b)); });
    return box;
  }

  function renderImage(url, alt) {
    var a = h('a', 'image');
    a.href = url; a.target = '_blank'; a.rel = 'noopener noreferrer';
    var img = h('img');
    img.src = url; img.alt = alt || 'Image'; img.loading = 'lazy';
    a.appendChild(img);
    return a;
  }

  function renderCard(c, ratio) {
    var card = h('article', 'card' + (ratio === 'square' ? ' square' : ''));
    card.setAttribute('role', 'listitem');
    var media = h('div', 'media');
    if (isHTTPS(c.image_url)) {
      var img = h('img');
      img.src = c.image_url; img.alt = ''; img.loading = 'lazy';
      img.addEventListener('error', function () { img.remove(); });
      media.appendChild(img);
    }
    card.appendChild(media);
    var body = h('div', 'card-body');
    body.appendChild(h('h2', 'card-title', c.title));
    if (c.subtitle) body.appendChild(h('p', 'card-sub', c.subtitle));
    card.appendChild(body);
    if (c.buttons && c.buttons.length) card.appendChild(renderButtons(c.buttons));
    return card;
  }

  function timeLabel(ts) {
    var d = new Date(ts);
    return isNaN(d) ? '' : d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  }

  function render(m) {
    var mine = m.sender === 'contact';
    var node = h('div', 'msg ' + (mine ? 'contact' : 'agent') + ' ' + m.type);
    node.dataset.id = m.id;
    node.dataset.sender = m.sender;
    node.dataset.type = m.type;
    if (m.type === 'image' && isHTTPS(m.image_url)) {
      node.appendChild(renderImage(m.image_url));
    } else if (m.type === 'carousel') {
      node.classList.add('wide');
      var row = h('div', 'carousel');
      row.setAttribute('role', 'list');
      row.setAttribute('aria-label', 'Cards');
      row.tabIndex = 0;
      (m.cards || []).forEach(function (c) { row.appendChild(renderCard(c, m.ratio)); });
      node.appendChild(row);
    } else {
      var bubble = h('div', 'bubble');
      linkify(bubble, m.text || '');
      node.appendChild(bubble);
      if (m.buttons && m.buttons.length) node.appendChild(renderButtons(m.buttons));
    }
    var meta = h('div', 'meta');
    var time = h('time', '', timeLabel(m.created_at));
    time.dateTime = m.created_at;
    meta.appendChild(time);
    node.appendChild(meta);
    node.quickReplies = m.quick_replies || [];
    setTime(node, m.created_at);
    return node;
  }

  function setTime(node, ts) {
    var t = Date.parse(ts);
    node.at = isNaN(t) ? Date.now() : t;
    var time = node.querySelector('.meta time');
    if (time) { time.dateTime = ts; time.textContent = timeLabel(ts); }
  }

  function messages() { return log.querySelectorAll('.msg'); }

  function nearBottom() { return log.scrollHeight - log.scrollTop - log.clientHeight < 80; }
  function toBottom() { log.scrollTop = log.scrollHeight; }

  // add shows m once (by id), in time order.
  function add(m) {
    if (!m || !m.id) return null;
    if (byId[m.id]) return byId[m.id];
    var stick = nearBottom() || m.sender === 'contact';
    var node = render(m);
    var all = messages(), before = typing;
    for (var i = all.length - 1; i >= 0; i--) {
      if (all[i].at <= node.at) break;
      before = all[i];
    }
    log.insertBefore(node, before);
    byId[m.id] = node;
    empty.hidden = true;
    if (m.sender !== 'contact') hideTyping();
    regroup();
    refreshChips();
    if (stick) toBottom();
    return node;
  }

  // regroup marks the last message of each run by one side, which shows the
  // time and the bubble's tail.
  function regroup() {
    var all = messages();
    for (var i = 0; i < all.length; i++) {
      var next = all[i + 1];
      var tail = !next || next.dataset.sender !== all[i].dataset.sender || next.at - all[i].at > 120000;
      all[i].classList.toggle('tail', tail);
    }
  }

  // refreshChips offers the quick replies of the latest message, if the
  // agent sent it.
  function refreshChips() {
    var all = messages(), last = all[all.length - 1];
    chips.textContent = '';
    var offer = last && last.dataset.sender !== 'contact' ? last.quickReplies : [];
    offer.forEach(function (q) {
      var chip = h('button', 'chip', q);
      chip.type = 'button';
      chip.addEventListener('click', function () { say(q, q); });
      chips.appendChild(chip);
    });
    chips.hidden = offer.length === 0;
  }

  function showTyping() {
    var stick = nearBottom();
    typing.hidden = false;
    if (stick) toBottom();
    clearTimeout(typingTimer);
    typingTimer = setTimeout(hideTyping, 10000);
  }
  function hideTyping() { clearTimeout(typingTimer); typing.hidden = true; }

  function setStatus(online) {
    statusEl.classList.toggle('online', online);
    statusText.textContent = online ? 'Online' : 'Reconnecting…';
  }

  function showNotice(text) { notice.textContent = text; notice.hidden = !text; }

  // --- sending ---

  function send(node, path, body) {
    node.classList.add('pending');
    node.classList.remove('failed');
    var meta = node.querySelector('.meta');
    call('POST', path, body).then(function (d) {
      node.classList.remove('pending');
      if (d.message && d.message.created_at) setTime(node, d.message.created_at);
      showNotice('');
    }).catch(function (err) {
      node.classList.remove('pending');
      node.classList.add('failed');
      meta.textContent = err.status === 429 ? 'Too many messages. ' : 'Not sent. ';
      var retry = h('button', 'retry', 'Retry');
      retry.type = 'button';
      retry.addEventListener('click', function () {
        meta.textContent = '';
        meta.appendChild(h('time'));
        send(node, path, body);
      });
      meta.appendChild(retry);
    });
  }

  function say(text, quickReply) {
    var m = { id: newId(), sender: 'contact', type: 'text', text: text, created_at: new Date().toISOString() };
    var node = add(m);
    var body = { text: text, client_message_id: m.id };
    if (visitorName) body.name = visitorName;
    if (quickReply) body.quick_reply_payload = quickReply;
    send(node, '/messages', body);
  }

  function tap(b) {
    var m = { id: newId(), sender: 'contact', type: 'postback', text: b.title, created_at: new Date().toISOString() };
    var node = add(m);
    var body = { payload: b.payload, client_message_id: m.id };
    if (visitorName) body.name = visitorName;
    send(node, '/postbacks', body);
  }

  function autosize() {
    input.style.height = 'auto';
    input.style.height = Math.min(input.scrollHeight + 2, 140) + 'px';
    sendBtn.disabled = input.value.trim() === '';
  }

  form.addEventListener('submit', function (e) {
    e.preventDefault();
    var text = input.value.trim();
    if (!text) return;
    input.value = '';
    autosize();
    say(text);
    input.focus();
  });
  input.addEventListener('input', autosize);
  input.addEventListener('keydown', function (e) {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      form.requestSubmit ? form.requestSubmit() : form.dispatchEvent(new Event('submit', { cancelable: true }));
    }
  });

  // --- receiving ---

  function loadHistory() {
    return call('GET', '/history?limit=50').then(function (d) {
      (d.messages || []).forEach(add);
    });
  }

  var stream = null, connected = false, retryDelay = 1000;

  function parse(data) {
    try { return JSON.parse(data); } catch (e) { return null; }
  }

  function dispatch(name, data) {
    if (name === 'ready') {
      setStatus(true);
      showNotice('');
      retryDelay = 1000;
      // After a reconnect, fetch what was pushed while we were away.
      if (connected) loadHistory().catch(function () {});
      connected = true;
    } else if (name === 'message') {
      add(parse(data));
    } else if (name === 'typing') {
      showTyping();
    }
  }

  // readEvents parses the text/event-stream body: blocks separated by a
  // blank line, "event:" and "data:" fields, ":" comments (pings).
  function readEvents(body) {
    var reader = body.getReader(), decoder = new TextDecoder(), buf = '';
    function block(text) {
      var name = 'message', data = [];
      text.split('\n').forEach(function (line) {
        if (line.indexOf('event:') === 0) name = line.slice(6).trim();
        else if (line.indexOf('data:') === 0) data.push(line.slice(5).replace(/^ /, ''));
      });
      if (data.length) dispatch(name, data.join('\n'));
    }
    function pump() {
      return reader.read().then(function (r) {
        if (r.done) throw new Error('stream ended');
        buf = (buf + decoder.decode(r.value, { stream: true })).replace(/\r\n?/g, '\n');
        var end;
        while ((end = buf.indexOf('\n\n')) >= 0) {
          block(buf.slice(0, end));
          buf = buf.slice(end + 2);
        }
        return pump();
      });
    }
    return pump();
  }

  function connect() {
    if (stream) stream.abort();
    var ctl = new AbortController();
    stream = ctl;
    session().then(function () {
      return fetch(base + '/events', {
        headers: { Accept: 'text/event-stream', 'X-Visitor-Token': token },
        cache: 'no-store', credentials: 'omit', signal: ctl.signal
      });
    }).then(function (res) {
      if (!res.ok || !res.body) {
        var err = new Error('HTTP ' + res.status);
        err.status = res.status;
        err.retryAfter = Number(res.headers.get('Retry-After')) || 0;
        throw err;
      }
      return readEvents(res.body);
    }).catch(function (err) {
      if (ctl.signal.aborted) return;
      stream = null;
      setStatus(false);
      // Ended or refused (token, limits, shutdown): check the token (a
      // refused one is replaced), then reconnect, backing off.
      var wait = Math.max(retryDelay, (err.retryAfter || 0) * 1000);
      retryDelay = Math.min(retryDelay * 2, 30000);
      setTimeout(function () {
        call('GET', '/history?limit=1').catch(function () {}).then(connect);
      }, wait);
    });
  }

  function start() {
    call('GET', '/history?limit=50')
      .then(function (d) {
        (d.messages || []).forEach(add);
        toBottom();
        connect();
      })
      .catch(function () {
        showNotice('Chat is unavailable right now. Retrying…');
        setTimeout(start, 5000);
      });
  }

  autosize();
  start();
})();

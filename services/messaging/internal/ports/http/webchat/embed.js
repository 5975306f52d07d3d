/*
 * Parley webchat launcher. Add to any page:
 *
 *   <script src="https://MESSAGING_HOST/webchat/CHANNEL_ID/embed.js" async
 *           data-title="Chat with us" data-accent="#4f46e5" data-position="right"></script>
 *
 * It adds a round chat button in a corner; the button opens the widget
 * (an iframe of /webchat/CHANNEL_ID) in a panel, full screen on phones.
 * data-name passes a visitor name the page knows (a signed-in user).
 */
(function () {
  'use strict';
  var script = document.currentScript;
  if (!script) return;
  var src = new URL(script.src, location.href);
  var widget = new URL(src.pathname.replace(/\/embed\.js$/, ''), src);
  var key = '__parleyWebchat:' + widget.pathname;
  if (window[key]) return;
  window[key] = true;

  var data = script.dataset;
  ['title', 'accent', 'name'].forEach(function (k) {
    if (data[k]) widget.searchParams.set(k, data[k]);
  });
  var accent = /^#([0-9a-f]{3}|[0-9a-f]{6})$/i.test(data.accent || '') ? data.accent : '#4f46e5';
  var side = data.position === 'left' ? 'left' : 'right';
  var label = data.title || 'Chat with us';

  var chatIcon = '<svg viewBox="0 0 24 24" width="26" height="26" fill="none" stroke="currentColor" stroke-width="2" stroke-linecap="round" stroke-linejoin="round" aria-hidden="true"><path d="M21 11.5a8.38 8.38 0 0 1-.9 3.8 8.5 8.5 0 0 1-7.6 4.7 8.38 8.38 0 0 1-3.8-.9L3 21l1.9-5.7a8.38 8.38 0 0 1-.9-3.8 8.5 8.5 0 0 1 4.7-7.6 8.38 8.38 0 0 1 3.8-.9h.5a8.48 8.48 0 0 1 8 8v.5z"/></svg>';
  var closeIcon = '<svg viewBox="0 0 24 24" width="24" height="24" fill="none" stroke="currentColor" stroke-width="2.2" stroke-linecap="round" aria-hidden="true"><path d="M6 6l12 12M18 6L6 18"/></svg>';

  var button = document.createElement('button');
  button.type = 'button';
  button.innerHTML = chatIcon;
  button.setAttribute('aria-label', 'Open chat: ' + label);
  button.setAttribute('aria-expanded', 'false');
  var frame = null, open = false;

  function small() { return window.innerWidth < 480; }

  function layout() {
    var b = button.style;
    b.position = 'fixed'; b.zIndex = '2147483001'; b[side] = '20px'; b.bottom = '20px';
    b.width = b.height = '56px'; b.borderRadius = '50%'; b.border = '0'; b.padding = '0';
    b.display = 'grid'; b.placeItems = 'center'; b.cursor = 'pointer';
    b.background = accent; b.color = '#fff';
    b.boxShadow = '0 6px 24px rgba(0,0,0,.22)';
    if (open && small()) { b.bottom = 'auto'; b.top = '10px'; b[side] = '10px'; b.width = b.height = '40px'; b.boxShadow = 'none'; b.background = 'rgba(0,0,0,.25)'; }
    else { b.top = 'auto'; }
    if (!frame) return;
    var f = frame.style;
    f.position = 'fixed'; f.zIndex = '2147483000'; f.border = '0'; f.background = '#fff';
    f.display = open ? 'block' : 'none';
    if (small()) {
      f.top = '0'; f.left = '0'; f.right = 'auto'; f.bottom = 'auto';
      f.width = '100vw'; f.height = '100%'; f.borderRadius = '0'; f.boxShadow = 'none';
    } else {
      f.top = 'auto'; f.left = f.right = 'auto'; f[side] = '20px'; f.bottom = '88px';
      f.width = '380px'; f.height = 'min(600px, calc(100vh - 120px))';
      f.borderRadius = '16px'; f.boxShadow = '0 12px 48px rgba(0,0,0,.2)';
    }
  }

  function toggle() {
    open = !open;
    if (open && !frame) {
      frame = document.createElement('iframe');
      frame.src = widget.href;
      frame.title = label;
      frame.setAttribute('allow', 'clipboard-write');
      document.body.appendChild(frame);
    }
    button.innerHTML = open ? closeIcon : chatIcon;
    button.setAttribute('aria-expanded', String(open));
    button.setAttribute('aria-label', (open ? 'Close chat: ' : 'Open chat: ') + label);
    layout();
    if (open) frame.focus();
  }

  button.addEventListener('click', toggle);
  document.addEventListener('keydown', function (e) { if (e.key === 'Escape' && open) toggle(); });
  window.addEventListener('resize', layout);

  function mount() { document.body.appendChild(button); layout(); }
  if (document.body) mount(); else document.addEventListener('DOMContentLoaded', mount);
})();

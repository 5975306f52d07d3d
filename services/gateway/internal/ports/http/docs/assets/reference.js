// The API reference page (GET /docs): Redoc draws the gateway's OpenAPI
// document. The page's Content-Security-Policy lets it reach the gateway
// only (docs.go says what it allows and why).
(function () {
  'use strict';

  // Redoc's sidebar footer sets an image to Redocly's logo on their CDN.
  // This page asks nothing of any other origin, so such an image address is
  // never set (the policy would refuse the request anyway, as an error).
  // data: images (Redoc's icons) stay.
  function elsewhere(address) {
    var url = new URL(String(address), document.baseURI);
    return url.protocol !== 'data:' && url.origin !== location.origin;
  }
  var setAttribute = Element.prototype.setAttribute;
  Element.prototype.setAttribute = function (name, value) {
    if (this instanceof HTMLImageElement && String(name).toLowerCase() === 'src' && elsewhere(value)) {
      return;
    }
    return setAttribute.call(this, name, value);
  };
  var src = Object.getOwnPropertyDescriptor(HTMLImageElement.prototype, 'src');
  Object.defineProperty(HTMLImageElement.prototype, 'src', {
    configurable: true,
    enumerable: src.enumerable,
    get: src.get,
    set: function (value) {
      if (!elsewhere(value)) {
        src.set.call(this, value);
      }
    }
  });

  var root = document.getElementById('reference');
  var sans = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif';
  Redoc.init(root.dataset.spec, {
    // styled-components' <style> elements carry the page's nonce, which the
    // policy's style-src names.
    nonce: document.querySelector('meta[property="csp-nonce"]').content,
    expandResponses: '200,201',
    jsonSampleExpandLevel: 3,
    sortPropsAlphabetically: false,
    // No web fonts: the system's own.
    theme: {
      typography: {
        fontFamily: sans,
        headings: { fontFamily: sans, fontWeight: '600' },
        code: { fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace' }
      }
    }
  }, root);
})();

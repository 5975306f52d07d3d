// Copy buttons: <button data-copy="ID" hidden> copies the text of the
// element with id ID. The buttons stay hidden without this script, where
// the text itself is selectable; the nearest .copy-status says what
// happened, for screen readers too.
(function () {
  "use strict";
  function status(button, text) {
    var out = button.parentNode.querySelector(".copy-status");
    if (out) { out.textContent = text; }
  }
  function select(el) {
    var range = document.createRange();
    range.selectNodeContents(el);
    var sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
  }
  document.querySelectorAll("button[data-copy]").forEach(function (button) {
    var target = document.getElementById(button.getAttribute("data-copy"));
    if (!target) { return; }
    button.hidden = false;
    button.addEventListener("click", function () {
      var text = target.textContent.trim();
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(function () {
          status(button, "Copied.");
        }, function () {
          select(target);
          status(button, "Could not copy: it is selected instead, press Ctrl+C (⌘C on a Mac).");
        });
        return;
      }
      select(target);
      status(button, document.execCommand && document.execCommand("copy")
        ? "Copied."
        : "It is selected: press Ctrl+C (⌘C on a Mac) to copy it.");
    });
  });
})();

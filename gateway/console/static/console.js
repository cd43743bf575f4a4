// The console's one script for every page: the copy buttons. A page works
// without it; it only spares selecting a URL or a key by hand.
"use strict";
(function () {
  function copied(button, text) {
    var section = button.closest("section") || document.body;
    var out = section.querySelector(".copied");
    if (out) {
      out.textContent = text;
    }
  }
  document.addEventListener("click", function (ev) {
    var button = ev.target.closest("button.copy");
    if (!button) {
      return;
    }
    var input = document.getElementById(button.dataset.copy);
    if (!input) {
      return;
    }
    var label = document.querySelector('label[for="' + input.id + '"]');
    var what = label ? label.textContent : "It";
    function fallback() {
      // Where the Clipboard API is refused (plain http to another host),
      // the old way: select the text and copy the selection.
      input.focus();
      input.select();
      var ok = false;
      try {
        ok = document.execCommand("copy");
      } catch (e) {
        ok = false;
      }
      copied(button, ok ? what + " copied." : "Press Ctrl+C to copy the selected text.");
    }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(input.value).then(function () {
        copied(button, what + " copied.");
      }, fallback);
    } else {
      fallback();
    }
  });
})();

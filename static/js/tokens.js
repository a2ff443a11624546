/* opsconsole console: the API tokens page. The "Copy" button next to a new token copies it to the clipboard
 * (navigator.clipboard where the page is a secure context, else a selection and execCommand("copy")); the
 * token stays selectable by hand without JavaScript. */
(function () {
  "use strict";

  function say(text) {
    var status = document.getElementById("copy-status");
    if (status) status.textContent = text;
  }

  function fallback(input) {
    input.focus();
    input.select();
    try {
      say(document.execCommand("copy") ? "Copied." : "Select it and copy by hand.");
    } catch (e) {
      say("Select it and copy by hand.");
    }
  }

  function copy(event) {
    var input = document.getElementById(event.currentTarget.getAttribute("data-copy-target"));
    if (!input) return;
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(input.value).then(function () { say("Copied."); },
                                                       function () { fallback(input); });
    } else {
      fallback(input);
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    var buttons = document.querySelectorAll("[data-copy-target]");
    for (var i = 0; i < buttons.length; i++) buttons[i].addEventListener("click", copy);
    var input = document.getElementById("new-token");
    if (input) input.addEventListener("focus", function () { input.select(); });
  });
})();

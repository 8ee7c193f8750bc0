// The copy button next to a new API key. Loaded from /assets (no inline script: the pages'
// Content-Security-Policy is default-src 'self').
document.addEventListener("click", function (event) {
  var button = event.target.closest("[data-copy-target]");
  if (!button) return;
  var source = document.getElementById(button.getAttribute("data-copy-target"));
  if (!source) return;
  var text = source.textContent.trim();
  var done = function () {
    button.textContent = "Copied";
    setTimeout(function () { button.textContent = "Copy"; }, 2000);
  };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(text).then(done, function () { select(source); });
  } else {
    select(source);
    try { if (document.execCommand("copy")) done(); } catch (e) { /* selected for a manual copy */ }
  }
});

function select(element) {
  var range = document.createRange();
  range.selectNodeContents(element);
  var selection = window.getSelection();
  selection.removeAllRanges();
  selection.addRange(range);
}

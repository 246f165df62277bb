// /api/docs: names for the controls Swagger UI draws without one, as it draws them (it
// re-renders on every click, so a MutationObserver keeps up). A parameter's select or input
// is named after the parameter, a request body's textarea "Request body", and a scrolling
// example is reachable by keyboard (tabindex) with a name. axe checks the page
// (tests/integration/test_every_page.py); nothing here changes what Swagger UI sends.
(function () {
  "use strict";

  function name(el, label) {
    if (!el.hasAttribute("aria-label") && !el.hasAttribute("aria-labelledby")) el.setAttribute("aria-label", label);
  }

  function label(root) {
    root.querySelectorAll("tr[data-param-name]").forEach(function (row) {
      var param = row.getAttribute("data-param-name");
      var where = row.getAttribute("data-param-in") || "parameter";
      row.querySelectorAll("select, input, textarea").forEach(function (el) { name(el, param + " (" + where + ")"); });
    });
    root.querySelectorAll(".body-param textarea").forEach(function (el) { name(el, "Request body"); });
    root.querySelectorAll(".body-param__example textarea, .curl-command textarea").forEach(function (el) { name(el, "Example"); });
    root.querySelectorAll(".content-type-wrapper select, select.content-type").forEach(function (el) { name(el, "Media type"); });
    root.querySelectorAll(".servers select").forEach(function (el) { name(el, "Server"); });
    root.querySelectorAll("select:not([aria-label]), input:not([aria-label]):not([type=hidden])").forEach(function (el) {
      if (!el.labels || !el.labels.length) name(el, el.getAttribute("placeholder") || el.getAttribute("title") || "Value");
    });
    root.querySelectorAll(".highlight-code > pre, pre.microlight, .microlight").forEach(function (el) {
      if (!el.hasAttribute("tabindex")) el.setAttribute("tabindex", "0");
      name(el, "Example");
    });
  }

  function start() {
    var ui = document.getElementById("swagger-ui");
    if (!ui) return;
    label(ui);
    new MutationObserver(function () { label(ui); }).observe(ui, { childList: true, subtree: true });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();

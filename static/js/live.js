/* The page's own script (served from 'self': no inline script, no eval, no inline handlers).
 *
 * - A banner while the live refresh fails (server error or no connection), hidden
 *   again by the next refresh that works.
 * - Selects marked data-autosubmit submit their form when changed.
 */
(function () {
  "use strict";

  function isPoll(event) {
    var elt = event.detail && event.detail.elt;
    return Boolean(elt && elt.id === "live-poll");
  }

  function banner(show) {
    var el = document.getElementById("live-banner");
    if (el) {
      el.hidden = !show;
    }
  }

  document.addEventListener("htmx:responseError", function (event) {
    if (isPoll(event)) banner(true);
  });
  document.addEventListener("htmx:sendError", function (event) {
    if (isPoll(event)) banner(true);
  });
  document.addEventListener("htmx:timeout", function (event) {
    if (isPoll(event)) banner(true);
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    if (isPoll(event) && event.detail.successful) banner(false);
  });

  document.addEventListener("change", function (event) {
    var target = event.target;
    if (target instanceof HTMLSelectElement && target.hasAttribute("data-autosubmit") && target.form) {
      target.form.requestSubmit();
    }
  });
})();

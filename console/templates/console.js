// redstream console: "select all" and confirmation of destructive buttons. The pages work
// without it.
document.addEventListener("DOMContentLoaded", function () {
  var all = document.getElementById("select-all");
  if (all) {
    all.addEventListener("change", function () {
      document.querySelectorAll("input.sel").forEach(function (b) { b.checked = all.checked; });
    });
  }
  document.querySelectorAll("[data-confirm]").forEach(function (el) {
    el.addEventListener("click", function (ev) {
      if (!window.confirm(el.getAttribute("data-confirm"))) { ev.preventDefault(); }
    });
  });
});

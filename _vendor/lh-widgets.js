// The website's widgets (labhelpers.site_frames): each .lh-widget holds native controls, an <img> and its frames
// as JSON ({"images": [base64 PNG, ...], "index": {"i-j-k": image}}, keyed by the controls' stop indices).
// Moving a control shows the frame of the new combination. Added by _ext/book_assets.py to pages that have one.
(function () {
  "use strict";

  function colabLink() {
    // The chapter's own Colab badge (first markdown cell) or the launch button of the page header.
    var link = document.querySelector('a[href^="https://colab.research.google.com/github/"]');
    return link ? link.getAttribute("href") : null;
  }

  function wire(widget, colab) {
    var data = JSON.parse(widget.querySelector("script.lh-frames").textContent);
    var img = widget.querySelector("img.lh-frame");
    var controls = Array.prototype.slice.call(widget.querySelectorAll("[data-control]"));
    controls.sort(function (a, b) { return a.dataset.control - b.dataset.control; });

    function show() {
      var key = controls.map(function (c) { return c.value; }).join("-");
      var image = data.index[key];
      if (image !== undefined) {
        img.src = "data:image/png;base64," + data.images[image];
      }
    }

    function label(control) {
      if (control.type === "range") {
        var labels = JSON.parse(control.dataset.labels);
        control.parentNode.querySelector("output").textContent = labels[control.value];
      }
    }

    controls.forEach(function (control) {
      control.addEventListener("input", function () { label(control); show(); });
      control.addEventListener("change", function () { label(control); show(); });
      label(control);  // a browser may restore a moved control when the reader comes back to the page
    });
    show();
    var anchor = widget.querySelector("a.lh-colab");
    if (anchor && colab) {
      anchor.setAttribute("href", colab);
    }
  }

  function wireAll() {
    var colab = colabLink();
    document.querySelectorAll(".lh-widget").forEach(function (widget) { wire(widget, colab); });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", wireAll);
  } else {
    wireAll();
  }
})();

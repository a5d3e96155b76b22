// Loaded by _ext/book_assets.py as a deferred script, after MathJax and before the widget manager renders.
(function () {
  // The manager typesets widget labels with MathJax 2's MathJax.Hub.Queue(["Typeset", Hub, el]); this book
  // loads MathJax 3 (no Hub). Map that one call onto MathJax 3's typesetPromise.
  var mj = window.MathJax;
  if (mj && !mj.Hub) {
    mj.Hub = {
      Queue: function (job) {
        var element = job && job.length > 2 ? job[2] : undefined;
        if (window.MathJax && window.MathJax.typesetPromise) {
          window.MathJax.typesetPromise(element ? [element] : undefined).catch(function () {});
        }
      }
    };
  }
})();

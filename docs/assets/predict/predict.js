// Prediction questions (snippets/exercises/predictions.py writes the forms): the
// reader commits a number, then the answer opens with how far the guess was. The
// answer is in the page already, in a <details> a reader without scripts can open;
// with scripts it opens only once something is committed.

// "1.5e6", "1,572,864", "1.5 MiB", "3/11", "27%": a number, or NaN
function parse(text) {
  const t = text.trim().replace(/[,_\s]/g, "");
  const units = { kib: 2 ** 10, mib: 2 ** 20, gib: 2 ** 30, kb: 1e3, mb: 1e6, gb: 1e9 };
  let m = t.match(/^(-?[\d.]+(?:e-?\d+)?)(kib|mib|gib|kb|mb|gb|b|bytes|%)?$/i);
  if (m) {
    const unit = (m[2] || "").toLowerCase();
    const x = parseFloat(m[1]);
    if (unit === "%") return x / 100;
    return x * (units[unit] || 1);
  }
  m = t.match(/^(-?\d+)\/(\d+)$/);
  return m ? parseInt(m[1], 10) / parseInt(m[2], 10) : NaN;
}

function verdict(guess, answer) {
  if (Number.isNaN(guess)) return "That is not a number I can read; compare by eye.";
  if (guess === answer) return "Exactly right.";
  const ratio = guess / answer;
  if (Math.abs(ratio - 1) <= 0.05) return "Within 5%: right.";
  if (ratio > 0) {
    const times = ratio > 1 ? ratio : 1 / ratio;
    const way = ratio > 1 ? "too high" : "too low";
    return `Off: ${times.toPrecision(3)}× ${way}.`;
  }
  return "Off: not even the right sign.";
}

function wire(form) {
  const answer = parseFloat(form.dataset.answer);
  const details = form.querySelector("details");
  const input = form.querySelector("input");
  const said = form.querySelector(".cp-predict-verdict");
  const summary = details.querySelector("summary");
  const prompt = form.querySelector(".cp-predict-prompt");
  // opening the answer before committing a guess: ask for the guess first
  summary.addEventListener("click", (event) => {
    if (!details.open && !form.dataset.committed) {
      event.preventDefault();
      prompt.textContent =
        "Commit a guess first: type it and press the button (or press it " +
        "with the field empty to just see the answer).";
      form.classList.add("cp-predict-ask");
      input.focus();
    }
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    form.dataset.committed = "yes";
    form.classList.remove("cp-predict-ask");
    prompt.textContent = "";
    const guess = parse(input.value);
    said.textContent = input.value.trim()
      ? `You said ${input.value.trim()}. ${verdict(guess, answer)}`
      : "You revealed it without a guess.";
    details.open = true;
    summary.focus();
  });
}

function start() {
  document.querySelectorAll("form.cp-predict").forEach(wire);
}

export { parse, verdict };

// node --test imports the functions, without a document
if (typeof document !== "undefined") start(); // a module runs once the page is parsed

// One task app, two builds: the page's data-build says whether it renders into open shadow roots or the light DOM.
// Everything else (markup, names, behaviour, writes) is the same, so a reader that sees one sees the other.
const SHADOW = document.documentElement.dataset.build === "shadow";
const STYLE = `
  form, .tools { margin: 8px 0; }
  ul { list-style: none; padding: 0; }
  li { padding: 4px 0; }
  .done label { text-decoration: line-through; }
  button { margin-left: 8px; }
`;

if (!SHADOW) {
  const style = document.createElement("style");
  style.textContent = STYLE;
  document.head.append(style);
}

function rootOf(host) {
  if (!SHADOW) return host;
  const root = host.attachShadow({ mode: "open" });
  const style = document.createElement("style");
  style.textContent = STYLE;
  root.append(style);
  return root;
}

class TaskItem extends HTMLElement {
  connectedCallback() {
    if (this.rendered) return;
    this.rendered = true;
    const root = rootOf(this);
    const id = `task-${this.dataset.index}`;
    const row = document.createElement("li");
    row.innerHTML = `<input type="checkbox" id="${id}"><label for="${id}"></label>
      <button type="button" class="remove"></button>`;
    row.querySelector("label").textContent = this.dataset.title;
    row.querySelector(".remove").textContent = "Remove";
    row.querySelector(".remove").setAttribute("aria-label", `Remove ${this.dataset.title}`);
    row.querySelector("input").addEventListener("change", (event) => {
      row.classList.toggle("done", event.target.checked);
      this.dispatchEvent(new CustomEvent("task-toggle", { bubbles: true, composed: true,
        detail: { index: Number(this.dataset.index), done: event.target.checked } }));
    });
    row.querySelector(".remove").addEventListener("click", () => {
      this.dispatchEvent(new CustomEvent("task-remove", { bubbles: true, composed: true,
        detail: { index: Number(this.dataset.index) } }));
    });
    root.append(row);
  }
}

class TaskApp extends HTMLElement {
  connectedCallback() {
    this.tasks = [
      { title: "Buy milk", done: false },
      { title: "Call the bank", done: false },
      { title: "Water the plants", done: false },
    ];
    this.filter = "all";
    const root = rootOf(this);
    const shell = document.createElement("section");
    shell.setAttribute("aria-label", "Task list");
    shell.innerHTML = `
      <form class="add">
        <label for="new-task">New task</label> <input id="new-task" name="title" autocomplete="off">
        <button type="submit">Add</button>
      </form>
      <div class="tools">
        <label for="show">Show</label>
        <select id="show"><option value="all">All</option><option value="open">Open</option>
          <option value="done">Done</option></select>
        <label for="due">Due date</label> <input id="due" type="date">
      </div>
      <ul class="items"></ul>
      <p class="status" role="status"></p>
      <button type="button" class="clear">Delete all tasks</button>`;
    root.append(shell);
    this.list = shell.querySelector(".items");
    this.status = shell.querySelector(".status");
    shell.querySelector(".add").addEventListener("submit", (event) => {
      event.preventDefault();
      const field = shell.querySelector("#new-task");
      const title = field.value.trim();
      if (!title) return;
      field.value = "";
      fetch("/shadow/add", { method: "POST", body: new URLSearchParams({ title }) });
      this.tasks.push({ title, done: false });
      this.render();
    });
    shell.querySelector("#show").addEventListener("change", (event) => {
      this.filter = event.target.value;
      this.render();
    });
    shell.querySelector(".clear").addEventListener("click", () => {
      fetch("/shadow/delete-all", { method: "POST" });
      this.tasks = [];
      this.render();
    });
    this.addEventListener("task-toggle", (event) => {
      this.tasks[event.detail.index].done = event.detail.done;
      this.render();
    });
    this.addEventListener("task-remove", (event) => {
      this.tasks.splice(event.detail.index, 1);
      this.render();
    });
    this.render();
  }

  render() {
    this.list.replaceChildren();
    this.tasks.forEach((task, index) => {
      if ((this.filter === "open" && task.done) || (this.filter === "done" && !task.done)) return;
      const item = document.createElement("task-item");
      item.dataset.index = String(index);
      item.dataset.title = task.title;
      this.list.append(item);
      const box = (item.shadowRoot || item).querySelector("input");
      box.checked = task.done;
      box.closest("li").classList.toggle("done", task.done);
    });
    const open = this.tasks.filter((task) => !task.done).length;
    this.status.textContent = `${this.tasks.length} tasks, ${open} open`;
  }
}

customElements.define("task-item", TaskItem);
customElements.define("task-app", TaskApp);

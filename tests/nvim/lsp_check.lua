-- Drives Neovim's built-in LSP client (0.7 API: vim.lsp.start_client / buf_attach_client)
-- against `cargo-idem-lint idem-lint lsp` on a copy of fixtures/lsp, and writes what Neovim
-- received to $IDEM_NVIM_OUT as JSON: the diagnostics after opening the file, after an
-- unsaved edit, and after applying a code action. Run by tests/nvim.rs.
local bin = os.getenv("IDEM_LSP_BIN")
local root = os.getenv("IDEM_FIXTURE_ROOT")
local out_path = os.getenv("IDEM_NVIM_OUT")
local file = root .. "/src/lib.rs"
local timeout = 60000

local report = { steps = {} }
local published = {}

local function finish(err)
  report.error = err
  local f = io.open(out_path, "w")
  f:write(vim.fn.json_encode(report))
  f:close()
  vim.cmd(err and "cquit 1" or "qall!")
end

local function run()
  local client_id = vim.lsp.start_client({
    name = "idem-lint",
    cmd = { bin, "idem-lint", "lsp", "--debounce-ms", "50" },
    root_dir = root,
    workspace_folders = { { uri = vim.uri_from_fname(root), name = "fixture" } },
    handlers = {
      ["textDocument/publishDiagnostics"] = function(err, result, ctx, config)
        table.insert(published, result)
        return vim.lsp.handlers["textDocument/publishDiagnostics"](err, result, ctx, config)
      end,
    },
  })
  assert(client_id, "the client did not start")
  vim.cmd("edit " .. vim.fn.fnameescape(file))
  local bufnr = vim.api.nvim_get_current_buf()
  local uri = vim.uri_from_bufnr(bufnr)
  assert(vim.lsp.buf_attach_client(bufnr, client_id), "attach failed")

  -- The newest publication for the buffer after `seen` publications.
  local function wait_publish(seen, what)
    local found
    local ok = vim.wait(timeout, function()
      for i = #published, seen + 1, -1 do
        if published[i].uri == uri then
          found = published[i]
          return true
        end
      end
      return false
    end, 20)
    assert(ok, "no diagnostics " .. what .. " within " .. timeout .. " ms")
    return found
  end
  local function step(name, seen)
    local got = wait_publish(seen, name)
    table.insert(report.steps, {
      name = name,
      version = got.version,
      diagnostics = got.diagnostics,
      -- What Neovim itself now shows for the buffer.
      shown = #vim.diagnostic.get(bufnr),
      buffer = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false),
    })
    return got
  end

  step("open", 0)

  -- An unsaved edit: the key now comes from the message.
  local seen = #published
  local lines = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
  for i, line in ipairs(lines) do
    if line:find("Uuid::new_v4", 1, true) then
      vim.api.nvim_buf_set_lines(bufnr, i - 1, i, false, { "    let id = order_id.to_string();" })
      break
    end
  end
  local after = step("unsaved edit", seen)
  report.modified = vim.api.nvim_buf_get_option(bufnr, "modified")

  -- A code action at the remaining finding, applied.
  local diag = after.diagnostics[1]
  assert(diag, "no finding left to fix")
  local params = {
    textDocument = { uri = uri },
    range = diag.range,
    context = { diagnostics = { diag } },
  }
  local responses = vim.lsp.buf_request_sync(bufnr, "textDocument/codeAction", params, timeout)
  local actions = (responses and responses[client_id] and responses[client_id].result) or {}
  assert(#actions > 0, "no code action offered")
  report.actions = vim.tbl_map(function(a) return a.title end, actions)
  seen = #published
  local client = vim.lsp.get_client_by_id(client_id)
  vim.lsp.util.apply_workspace_edit(actions[1].edit, client.offset_encoding)
  step("code action applied", seen)

  vim.lsp.stop_client(client_id)
  finish(nil)
end

local ok, err = pcall(run)
if not ok then
  finish(tostring(err))
end

-- Runs after the README's Neovim configuration (loaded with `-u`): opens the files named in
-- $IDEM_FILES (separated by newlines) one after the other, waits for the diagnostics of each,
-- and writes to $IDEM_NVIM_OUT how many idem-lint clients run and what each buffer shows.
-- Run by tests/nvim.rs.
local files = vim.split(os.getenv("IDEM_FILES"), "\n", { trimempty = true })
local want = tonumber(os.getenv("IDEM_WANT"))
local out_path = os.getenv("IDEM_NVIM_OUT")
local timeout = 60000

local report = { buffers = {} }

local function finish(err)
  report.error = err
  local f = io.open(out_path, "w")
  f:write(vim.fn.json_encode(report))
  f:close()
  vim.cmd(err and "cquit 1" or "qall!")
end

local function idem_clients()
  local found = {}
  for _, client in pairs(vim.lsp.get_active_clients()) do
    if client.name == "idem-lint" then
      table.insert(found, client)
    end
  end
  return found
end

local function run()
  local bufs = {}
  for _, file in ipairs(files) do
    vim.cmd("edit " .. vim.fn.fnameescape(file))
    table.insert(bufs, vim.api.nvim_get_current_buf())
  end
  local function shown()
    local n = 0
    for _, b in ipairs(bufs) do
      n = n + #vim.diagnostic.get(b)
    end
    return n
  end
  -- Every finding of the three files shown at least once.
  local ok = vim.wait(timeout, function() return shown() >= want end, 20)
  assert(ok, "the diagnostics did not come within " .. timeout .. " ms: " .. shown() .. " shown")
  report.clients = #idem_clients()
  for i, b in ipairs(bufs) do
    local diagnostics = {}
    for _, d in ipairs(vim.diagnostic.get(b)) do
      table.insert(diagnostics, { line = d.lnum + 1, code = d.code or "" })
    end
    local attached = 0
    for _, client in ipairs(idem_clients()) do
      if vim.lsp.buf_is_attached(b, client.id) then
        attached = attached + 1
      end
    end
    table.insert(report.buffers, { file = files[i], attached = attached, diagnostics = diagnostics })
  end
end

local ok, err = pcall(run)
finish(not ok and tostring(err) or nil)

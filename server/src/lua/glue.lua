-- coordis's Lua glue, loaded once per VM as chunk "=coordis".
--
-- Scripts never see the real globals table: each compiled script runs with a
-- read-only proxy as its environment (as Redis 7.0's read-only globals), whose
-- reads of undefined names raise. Library tables are read-only proxies too.
--
-- Rust functions raise errors as strings wrapped in \1...\2 (mlua carries
-- them as userdata); the handler below (Redis 7.0's __redis__err__handler)
-- turns any error into an {err=...} table and records where in the user
-- script it happened.
local getinfo, setfenv, visible = ...
local error, type, tostring, match, pcall, rawget, rawset, setmetatable, getmetatable, loadstring, load, sub =
      error, type, tostring, string.match, pcall, rawget, rawset, setmetatable, getmetatable, loadstring, load, string.sub

local readonly = setmetatable({}, {__mode = 'k'})

local function handler(err)
  local level = 2
  local info = getinfo(level, 'nSl')
  while info and (info.what == 'C' or info.source == '=coordis') do
    level = level + 1
    info = getinfo(level, 'nSl')
  end
  if type(err) ~= 'table' then
    local text = tostring(err)
    local raised = type(err) == 'userdata' and match(text, '\1(.-)\2')
    if raised then
      err = {err = raised}
    else
      err = {err = 'ERR ' .. text}
    end
  end
  if info then
    err['source'] = info.source
    err['line'] = info.currentline
  end
  return err
end

local function deny()
  error("Attempt to modify a readonly table", 2)
end

-- A read-only view of `t`.
local function protect(t)
  local proxy = setmetatable({}, {__index = t, __newindex = deny, __metatable = {}})
  readonly[proxy] = true
  return proxy
end

-- Reads go env -> visible (a plain table lookup) and only a miss reaches
-- the function that raises; writes to env are refused.
setmetatable(visible, {
  __index = function(_, name)
    error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
  end,
})
local env = setmetatable({}, {__index = visible, __newindex = deny, __metatable = {}})
readonly[env] = true

for _, name in ipairs({'string', 'table', 'math', 'coroutine', 'redis', 'cjson', 'bit', 'struct', 'cmsgpack'}) do
  visible[name] = protect(visible[name])
end
-- Strings' metatable: scripts see a read-only copy whose __index is the
-- read-only string library, so neither can be changed through
-- getmetatable(''); the real metatable (used by the VM) stays hidden.
do
  local string_mt = getmetatable('')
  local view = protect({__index = visible.string})
  string_mt.__metatable = view
end
visible._G = env
visible.rawset = function(t, k, v)
  if readonly[t] then error("Attempt to modify a readonly table", 0) end
  return rawset(t, k, v)
end
visible.setmetatable = function(t, mt)
  if readonly[t] then error("Attempt to modify a readonly table", 0) end
  return setmetatable(t, mt)
end
-- Redis 7.0's pcall: an error table's `err` field becomes the error value,
-- so pcall(redis.call, ...) returns false and the error text.
local function error_text(ok, ...)
  if ok then return ok, ... end
  local err = ...
  if type(err) == 'table' then
    local text = err.err
    if type(text) == 'string' or type(text) == 'number' then return false, text end
  end
  return false, err
end
visible.pcall = function(...)
  return error_text(pcall(...))
end
visible.getmetatable = getmetatable
visible.loadstring = function(s, name)
  if type(s) == 'string' and sub(s, 1, 1) == '\27' then return nil, 'binary code not allowed' end
  local f, e = loadstring(s, name)
  if f then setfenv(f, env) end
  return f, e
end
visible.load = function(reader, name)
  local first = true
  local f, e = load(function()
    local piece = reader()
    if first and type(piece) == 'string' and sub(piece, 1, 1) == '\27' then error('binary code not allowed', 0) end
    first = false
    return piece
  end, name)
  if f then setfenv(f, env) end
  return f, e
end

-- Gives a freshly compiled script the read-only environment.
local function adopt(f)
  setfenv(f, env)
  return f
end

-- The handler is returned for the Rust side, which calls scripts with
-- lua_pcall and this as the message handler (what xpcall does).
return handler, adopt

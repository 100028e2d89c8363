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
-- Arguments: debug.getinfo, setfenv, the table behind scripts' globals, and
-- a function loading cjson.lua (it returns cjson's `create`).
local getinfo, setfenv, visible, load_cjson = ...
local error, type, tostring, match, pcall, rawget, rawset, setmetatable, getmetatable, loadstring, load, sub =
      error, type, tostring, string.match, pcall, rawget, rawset, setmetatable, getmetatable, loadstring, load, string.sub
local pairs, ipairs, select = pairs, ipairs, select

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

-- A read-only view of `t`. Redis's read-only tables are plain tables with
-- a read-only flag and no metatable, so their getmetatable is nil; here it
-- is false (a metatable can be hidden only behind a non-nil value: a
-- difference README lists); a table there
-- would be one every script could write to.
local function protect(t)
  local proxy = setmetatable({}, {__index = t, __newindex = deny, __metatable = false})
  readonly[proxy] = true
  return proxy
end

-- cjson, the largest library, is loaded when a script or a function first
-- reads it, and unloaded when neither has one, so a VM whose scripts do not
-- use it stays small (Redis's tests bound its memory). Scripts and
-- functions run in VMs of their own (as in Redis), each loading this glue;
-- scripts read `cjson` from the globals, functions get their own table.
-- SCRIPT FLUSH replaces the scripts' VM, and its cjson with it; the
-- functions' one goes when no library is left, but its settings stay for
-- the next, as Redis's function VM lives on.
local create_cjson, function_cjson, function_cjson_settings
local function new_cjson(settings)
  if not create_cjson then create_cjson = load_cjson() end
  local cjson
  cjson, settings = create_cjson(settings)
  return protect(cjson), settings
end
local function unload_unused_cjson()
  if rawget(visible, 'cjson') == nil and function_cjson == nil then create_cjson = nil end
end
local function forget_function_cjson()
  function_cjson = nil
  unload_unused_cjson()
end

-- Reads go env -> visible (a plain table lookup) and only a miss reaches
-- the function that raises (or loads cjson); writes to env are refused.
setmetatable(visible, {
  __index = function(_, name)
    if name == 'cjson' then
      local cjson = new_cjson(nil)
      rawset(visible, 'cjson', cjson)
      return cjson
    end
    error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
  end,
})
-- What getmetatable(_G) gives: Redis's globals have a read-only metatable
-- whose __index raises on undefined names.
local globals_metatable = protect({
  __index = function(_, name)
    error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
  end,
})
local env = setmetatable({}, {__index = visible, __newindex = deny, __metatable = globals_metatable})
readonly[env] = true

-- Functions (FUNCTION LOAD / FCALL). Every library's code, and so every
-- callback it registers, runs with one read-only environment, `fn_env`.
-- While a library loads, the only global is `redis` with register_function,
-- log, the LOG_* levels and the version numbers (Redis 7.0's library API);
-- when a function runs, the globals are a script's, without KEYS and ARGV
-- (a function gets its keys and arguments as parameters), and with a
-- `redis` without the debugger's calls.
local real_redis = visible.redis
local lower, find, concat = string.lower, string.find, table.concat
local loading = false
-- The library being loaded: its functions in registration order, each
-- {name, callback, flags (a list of Redis's flag names), description}.
local registered = nil
local function missing(name)
  error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 3)
end
local FLAG_NAMES = {'no-writes', 'allow-oom', 'allow-stale', 'no-cluster', 'allow-cross-slot-keys'}
local function read_flags(list)
  local seen = {}
  local j = 1
  while true do
    local f = list[j]
    if f == nil then break end
    if type(f) ~= 'string' and type(f) ~= 'number' then return nil end
    local known = false
    for _, name in ipairs(FLAG_NAMES) do
      if lower(tostring(f)) == name then seen[name] = true known = true break end
    end
    if not known then return nil end
    j = j + 1
  end
  local flags = {}
  for _, name in ipairs(FLAG_NAMES) do
    if seen[name] then flags[#flags + 1] = name end
  end
  return flags
end
local function register_function(...)
  -- A library may keep `redis` and call this from a function later.
  if registered == nil then error({err = 'ERR redis.register_function can only be called on FUNCTION LOAD command'}) end
  local n = select('#', ...)
  if n < 1 or n > 2 then error('wrong number of arguments to redis.register_function', 0) end
  local name, callback, flags, description
  if n == 1 then
    local args = ...
    if type(args) ~= 'table' then
      error('calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).', 0)
    end
    for k, v in pairs(args) do
      if type(k) ~= 'string' and type(k) ~= 'number' then
        error('named argument key given to redis.register_function is not a string', 0)
      end
      local key = lower(tostring(k))
      if key == 'function_name' then
        if type(v) ~= 'string' and type(v) ~= 'number' then
          error('function_name argument given to redis.register_function must be a string', 0)
        end
        name = tostring(v)
      elseif key == 'description' then
        if type(v) ~= 'string' and type(v) ~= 'number' then
          error('description argument given to redis.register_function must be a string', 0)
        end
        description = tostring(v)
      elseif key == 'callback' then
        if type(v) ~= 'function' then
          error('callback argument given to redis.register_function must be a function', 0)
        end
        callback = v
      elseif key == 'flags' then
        if type(v) ~= 'table' then
          error('flags argument to redis.register_function must be a table representing function flags', 0)
        end
        flags = read_flags(v)
        if not flags then error('unknown flag given', 0) end
      else
        error('unknown argument given to redis.register_function', 0)
      end
    end
    if not name then error('redis.register_function must get a function name argument', 0) end
    if not callback then error('redis.register_function must get a callback argument', 0) end
  else
    local first, second = ...
    if type(first) ~= 'string' and type(first) ~= 'number' then
      error('first argument to redis.register_function must be a string', 0)
    end
    if type(second) ~= 'function' then
      error('second argument to redis.register_function must be a function', 0)
    end
    name, callback = tostring(first), second
  end
  -- (Redis 7.0.15 words a bad function name as a bad library name.)
  if name == '' or find(name, '[^%w_]') then
    error('Library names can only contain letters, numbers, or underscores(_) and must be at least one character long', 0)
  end
  for _, f in ipairs(registered) do
    if f[1] == name then error('Function already exists in the library', 0) end
  end
  registered[#registered + 1] = {name, callback, flags or {}, description}
end
local library_api = {register_function = register_function, log = real_redis.log,
  REDIS_VERSION = real_redis.REDIS_VERSION, REDIS_VERSION_NUM = real_redis.REDIS_VERSION_NUM}
for _, level in ipairs({'LOG_DEBUG', 'LOG_VERBOSE', 'LOG_NOTICE', 'LOG_WARNING'}) do
  library_api[level] = real_redis[level]
end
local library_redis = setmetatable({}, {
  __index = function(_, name)
    local v = library_api[name]
    if v == nil then missing(name) end
    return v
  end,
  __newindex = deny, __metatable = false,
})
readonly[library_redis] = true
local HIDDEN = {breakpoint = true, debug = true, replicate_commands = true}
local function_redis = setmetatable({}, {
  __index = function(_, name)
    if HIDDEN[name] then return nil end
    return real_redis[name]
  end,
  __newindex = deny, __metatable = false,
})
readonly[function_redis] = true
local fn_env = setmetatable({}, {
  __index = function(_, name)
    if name == 'redis' then return loading and library_redis or function_redis end
    if loading or name == 'KEYS' or name == 'ARGV' then missing(name) end
    if name == 'cjson' then
      if not function_cjson then
        function_cjson, function_cjson_settings = new_cjson(function_cjson_settings)
      end
      return function_cjson
    end
    local v = rawget(visible, name)
    if v == nil then missing(name) end
    return v
  end,
  __newindex = deny, __metatable = globals_metatable,
})
readonly[fn_env] = true

-- Runs a compiled library chunk in load mode; returns its registrations
-- (the chunk's errors propagate to the caller's handler).
local function load_library(chunk)
  setfenv(chunk, fn_env)
  registered = {}
  loading = true
  local ok, err = pcall(chunk)
  loading = false
  local found = registered
  registered = nil
  if not ok then error(err, 0) end
  return found
end

for _, name in ipairs({'string', 'table', 'math', 'coroutine', 'redis', 'bit', 'struct', 'cmsgpack'}) do
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
-- so pcall(redis.call, ...) returns false and the error text. An error a
-- Rust function raised (\1text\2, where Redis's C function raises an error
-- table) gives its text too.
local function error_text(ok, ...)
  if ok then return ok, ... end
  local err = ...
  if type(err) == 'table' then
    local text = err.err
    if type(text) == 'string' or type(text) == 'number' then return false, text end
  elseif type(err) == 'userdata' then
    local raised = match(tostring(err), '\1(.-)\2')
    if raised then return false, raised end
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
return handler, adopt, load_library, forget_function_cjson

-- cjson for coordis scripts: lua-cjson 2.1.0 as Redis 7.0 ships it (encode,
-- decode, null, the configuration functions and new), written in Lua so that
-- it runs in the script's VM and walks tables in the order lua-cjson's
-- lua_next does. Each function the library hands out is a C entry made by
-- `wrap` (cjson.rs) that calls it with its instance's settings; every error
-- goes through `raise`, which raises it as lua-cjson's C function would:
-- after the calling script's position (luaL_error), an argument error
-- naming the function as the script called it (luaL_argerror). `strtod` is
-- C's, which lua-cjson reads numbers with.
--
-- No function here that may raise is tail-called: a tail call leaves a
-- "(tail call)" frame where the script's error handler looks for the
-- script's line, past cjson's own frames.
--
-- This chunk returns `create(settings)`: a cjson table and its settings
-- (`settings`, or new ones at their defaults when nil).
local null, wrap, raise, strtod = ...
local select, type, next, rawget, tostring, tonumber, ipairs =
      select, type, next, rawget, tostring, tonumber, ipairs
local format, byte, char, sub, gsub, find, match, lower, floor, concat, huge =
      string.format, string.byte, string.char, string.sub, string.gsub, string.find, string.match,
      string.lower, math.floor, table.concat, math.huge

-- lua-cjson's texts, exactly.
local TEXT = {
  too_many_arguments = 'found too many arguments',
  one_argument = 'expected 1 argument',
  integer_range = 'expected integer between %d and %d',
  wrong_type = '%s expected, got %s',
  invalid_option = "invalid option '%s'",
  cannot_serialise = 'Cannot serialise %s: %s',
  nan_or_inf = 'must not be NaN or Inf',
  sparse = 'excessively sparse array',
  bad_key = 'table key must be a number or string',
  unsupported = 'type not supported',
  encode_nesting = 'Cannot serialise, excessive nesting (%d)',
  utf16 = 'JSON parser does not support UTF-16 or UTF-32',
  expected = 'Expected %s but found %s at character %d',
  decode_nesting = 'Found too many nested data structures (%d) at character %d',
  invalid_token = 'invalid token',
  invalid_number = 'invalid number',
  end_of_string = 'unexpected end of string',
  invalid_escape = 'invalid escape code',
  invalid_unicode = 'invalid unicode escape code',
}

local INT_MAX, INT_MIN = 2147483647, -2147483648
-- lua_checkstack refuses a C function more than LUAI_MAXCSTACK stack slots.
-- lua-cjson's depth checks ask it for room at every level, so nesting ends
-- there too (about 8000 arrays, 4000 objects deep) whatever the max depth.
local MAXCSTACK = 8000

-- An error in argument `narg`: "bad argument #N to 'name' (message)".
local function bad_argument(narg, message)
  raise(message, narg)
end

---------------------------------------------------------------- settings

local BOOLEAN_OPTIONS = { 'off', 'on' }
local INVALID_NUMBER_OPTIONS = { 'off', 'on', 'null' }

local function set_defaults(cfg)
  cfg.sparse_convert = 0
  cfg.sparse_ratio = 2
  cfg.sparse_safe = 10
  cfg.encode_max_depth = 1000
  cfg.decode_max_depth = 1000
  cfg.encode_invalid_numbers = 0 -- 0 off (an error), 1 on (nan, inf), 2 null
  cfg.decode_invalid_numbers = 1
  cfg.encode_keep_buffer = 1
  cfg.encode_number_precision = 14
  cfg.number_format = '%.14g'
end

-- At most `count` arguments (json_arg_init).
local function arguments(count, ...)
  if select('#', ...) > count then bad_argument(count + 1, TEXT.too_many_arguments) end
  return ...
end

-- What `(int)luaL_checkinteger(n)` gives on x86-64: the number truncated
-- toward zero to 64 bits (NaN and what does not fit become INT64_MIN), then
-- its low 32 bits. So 2.7 is 2, 2^32 + 5 is 5 and NaN is 0.
local function c_int(n)
  if n ~= n or n >= 2 ^ 63 or n < -2 ^ 63 then return 0 end
  n = n >= 0 and floor(n) or -floor(-n)
  n = n % 2 ^ 32
  if n >= 2 ^ 31 then n = n - 2 ^ 32 end
  return n
end

-- An integer setting (json_integer_option): nil reads it. lua-cjson reports
-- an out-of-range value as argument #1 whatever its position.
local function integer_option(cfg, field, value, narg, min, max)
  if value ~= nil then
    local n = tonumber(value)
    if n == nil then bad_argument(narg, format(TEXT.wrong_type, 'number', type(value))) end
    n = c_int(n)
    if n < min or n > max then bad_argument(1, format(TEXT.integer_range, min, max)) end
    cfg[field] = n
  end
  return cfg[field]
end

-- An enumerated setting (json_enum_option): a boolean means off/on, else
-- one of `options` by name (luaL_checkoption); nil reads it. Off and on
-- read as booleans, the others by name.
local function enum_option(cfg, field, value, narg, options)
  if value ~= nil then
    if type(value) == 'boolean' then
      cfg[field] = value and 1 or 0
    else
      local t = type(value)
      if t ~= 'string' and t ~= 'number' then bad_argument(narg, format(TEXT.wrong_type, 'string', t)) end
      -- C reads the name up to its first NUL.
      local name = match(tostring(value), '^[^%z]*')
      local found
      for i, option in ipairs(options) do
        if option == name then found = i - 1 break end
      end
      if not found then bad_argument(narg, format(TEXT.invalid_option, name)) end
      cfg[field] = found
    end
  end
  local setting = cfg[field]
  if setting == 0 or setting == 1 then return setting == 1 end
  return options[setting + 1]
end

local function encode_sparse_array(cfg, ...)
  local convert, ratio, safe = arguments(3, ...)
  convert = enum_option(cfg, 'sparse_convert', convert, 1, BOOLEAN_OPTIONS)
  ratio = integer_option(cfg, 'sparse_ratio', ratio, 2, 0, INT_MAX)
  safe = integer_option(cfg, 'sparse_safe', safe, 3, 0, INT_MAX)
  return convert, ratio, safe
end

-- A function reading or setting one integer setting.
local function integer_setting(field, min, max)
  return function(cfg, ...)
    local value = integer_option(cfg, field, arguments(1, ...), 1, min, max)
    return value
  end
end

-- A function reading or setting one enumerated setting. (lua-cjson keeps
-- a buffer between calls for encode_keep_buffer: nothing a script sees.)
local function enum_setting(field, options)
  return function(cfg, ...)
    local value = enum_option(cfg, field, arguments(1, ...), 1, options)
    return value
  end
end

local encode_max_depth = integer_setting('encode_max_depth', 1, INT_MAX)
local decode_max_depth = integer_setting('decode_max_depth', 1, INT_MAX)
local encode_keep_buffer = enum_setting('encode_keep_buffer', BOOLEAN_OPTIONS)
local encode_invalid_numbers = enum_setting('encode_invalid_numbers', INVALID_NUMBER_OPTIONS)
local decode_invalid_numbers = enum_setting('decode_invalid_numbers', BOOLEAN_OPTIONS)

local function encode_number_precision(cfg, ...)
  local precision = integer_option(cfg, 'encode_number_precision', arguments(1, ...), 1, 1, 14)
  cfg.number_format = '%.' .. precision .. 'g'
  return precision
end

---------------------------------------------------------------- encoding

local escapes = { ['"'] = '\\"', ['\\'] = '\\\\', ['/'] = '\\/', ['\b'] = '\\b', ['\f'] = '\\f',
                  ['\n'] = '\\n', ['\r'] = '\\r', ['\t'] = '\\t' }
local function escape_char(c)
  return escapes[c] or format('\\u%04x', byte(c))
end
local function encode_string(s)
  return '"' .. gsub(s, '[%z\1-\31"\\/\127]', escape_char) .. '"'
end

local function encode_number(cfg, n)
  local invalid = cfg.encode_invalid_numbers
  if invalid == 0 then
    if n ~= n or n == huge or n == -huge then
      raise(format(TEXT.cannot_serialise, 'number', TEXT.nan_or_inf))
    end
  elseif invalid == 1 then
    -- Whatever its sign: some C libraries print "-nan".
    if n ~= n then return 'nan' end
  elseif n ~= n or n == huge or n == -huge then
    return 'null'
  end
  return format(cfg.number_format, n)
end

-- `a * b` as C's int multiplication wraps (a, b >= 0): lua-cjson compares
-- the largest index with items * ratio in ints.
local function int_product(a, b)
  local low = b % 65536
  local p = (a * low + (a * ((b - low) / 65536) % 65536) * 65536) % 2 ^ 32
  if p >= 2 ^ 31 then p = p - 2 ^ 32 end
  return p
end

-- lua_array_length: the array's length, or -1 to encode the table as an
-- object. The largest index is a C int: an index of 2^31 or more (inf
-- included) stores INT_MIN there, which makes the table an object.
local function array_length(cfg, t)
  local max, items = 0, 0
  for k in next, t do
    if type(k) == 'number' and k >= 1 and floor(k) == k then
      if k > max then max = k < 2 ^ 31 and k or INT_MIN end
      items = items + 1
    else
      return -1
    end
  end
  local ratio = cfg.sparse_ratio
  if ratio > 0 and max > int_product(items, ratio) and max > cfg.sparse_safe then
    if cfg.sparse_convert == 0 then raise(format(TEXT.cannot_serialise, 'table', TEXT.sparse)) end
    return -1
  end
  return max
end

-- Appends `v`'s JSON to out[n + 1..]; returns the new n. `depth` counts
-- the tables around `v`; `top` is the height lua-cjson's C stack would have
-- with `v` on top: the argument, then one slot per enclosing array (the
-- element) and two per enclosing object (key and value).
local function append(cfg, out, n, v, depth, top)
  local t = type(v)
  if t == 'string' then
    n = n + 1; out[n] = encode_string(v)
  elseif t == 'number' then
    n = n + 1; out[n] = encode_number(cfg, v)
  elseif t == 'boolean' then
    n = n + 1; out[n] = v and 'true' or 'false'
  elseif t == 'table' then
    depth = depth + 1
    if depth > cfg.encode_max_depth or top + 3 > MAXCSTACK then
      raise(format(TEXT.encode_nesting, depth))
    end
    local length = array_length(cfg, v)
    if length > 0 then
      n = n + 1; out[n] = '['
      for i = 1, length do
        if i > 1 then n = n + 1; out[n] = ',' end
        n = append(cfg, out, n, rawget(v, i), depth, top + 1)
      end
      n = n + 1; out[n] = ']'
    else
      n = n + 1; out[n] = '{'
      local comma = false
      for key, value in next, v do
        if comma then n = n + 1; out[n] = ',' end
        comma = true
        local kt = type(key)
        if kt == 'number' then
          n = n + 1; out[n] = '"' .. encode_number(cfg, key) .. '":'
        elseif kt == 'string' then
          n = n + 1; out[n] = encode_string(key) .. ':'
        else
          raise(format(TEXT.cannot_serialise, kt, TEXT.bad_key))
        end
        n = append(cfg, out, n, value, depth, top + 2)
      end
      n = n + 1; out[n] = '}'
    end
  elseif t == 'nil' or v == null then
    n = n + 1; out[n] = 'null'
  else
    raise(format(TEXT.cannot_serialise, t, TEXT.unsupported))
  end
  return n
end

local function encode(cfg, ...)
  if select('#', ...) ~= 1 then bad_argument(1, TEXT.one_argument) end
  local out = {}
  append(cfg, out, 0, (...), 0, 1)
  local json = concat(out)
  return json
end

---------------------------------------------------------------- decoding

-- The text being decoded (cut at its first NUL, where C's reading stops),
-- the position of the next character, the settings, how many arrays and
-- objects are open, and where the last token started (errors report it).
-- Decoding never runs a script's code, so one set serves every call.
local text, pos, cfg_in_use, depth, token_at

local SINGLE = { ['{'] = 'T_OBJ_BEGIN', ['}'] = 'T_OBJ_END', ['['] = 'T_ARR_BEGIN', [']'] = 'T_ARR_END',
                 [','] = 'T_COMMA', [':'] = 'T_COLON' }
local SIMPLE_ESCAPES = { b = '\b', f = '\f', n = '\n', r = '\r', t = '\t', ['"'] = '"', ['\\'] = '\\', ['/'] = '/' }

local function utf8(cp)
  if cp < 0x80 then return char(cp)
  elseif cp < 0x800 then return char(0xC0 + floor(cp / 64), 0x80 + cp % 64)
  elseif cp < 0x10000 then return char(0xE0 + floor(cp / 4096), 0x80 + floor(cp / 64) % 64, 0x80 + cp % 64)
  end
  return char(0xF0 + floor(cp / 262144), 0x80 + floor(cp / 4096) % 64, 0x80 + floor(cp / 64) % 64, 0x80 + cp % 64)
end

local function hex4(at)
  local digits = match(text, '^%x%x%x%x', at)
  return digits and tonumber(digits, 16)
end

-- The \u escape at `at` (its backslash): its UTF-8 and its length, or nil.
-- A surrogate must be a high one followed by an escaped low one.
local function unicode_escape(at)
  local cp = hex4(at + 2)
  if not cp then return nil end
  if cp < 0xD800 or cp > 0xDFFF then return utf8(cp), 6 end
  if cp >= 0xDC00 or sub(text, at + 6, at + 7) ~= '\\u' then return nil end
  local low = hex4(at + 8)
  if not low or low < 0xDC00 or low > 0xDFFF then return nil end
  return utf8(0x10000 + (cp - 0xD800) * 1024 + (low - 0xDC00)), 12
end

-- A string token; an error token is reported where the fault is.
local function string_token()
  local pieces, count, i = {}, 0, pos + 1
  while true do
    local s, e = find(text, '^[^"\\]+', i)
    if s then
      count = count + 1; pieces[count] = sub(text, s, e)
      i = e + 1
    end
    local c = sub(text, i, i)
    if c == '"' then
      pos = i + 1
      return 'T_STRING', concat(pieces)
    elseif c == '' then
      token_at = i
      return 'T_ERROR', TEXT.end_of_string
    end
    local escape = sub(text, i + 1, i + 1)
    local piece, length
    if escape == 'u' then
      piece, length = unicode_escape(i)
      if not piece then token_at = i return 'T_ERROR', TEXT.invalid_unicode end
    else
      piece, length = SIMPLE_ESCAPES[escape], 2
      if not piece then token_at = i return 'T_ERROR', TEXT.invalid_escape end
    end
    count = count + 1; pieces[count] = piece
    i = i + length
  end
end

-- json_is_invalid_number: what strtod reads but JSON does not allow (a
-- leading +, hex, leading zeros, inf, nan).
local function is_invalid_number()
  local p = pos
  local c = byte(text, p)
  if c == 43 then return true end -- '+'
  if c == 45 then p = p + 1; c = byte(text, p) end -- '-'
  if c == 48 then -- '0'
    local after = byte(text, p + 1)
    return after == 120 or after == 88 or (after ~= nil and after >= 48 and after <= 57) -- x X 0-9
  elseif c == nil or c <= 57 then
    return false
  end
  local word = lower(sub(text, p, p + 2))
  return word == 'inf' or word == 'nan'
end

local function number_token()
  local value, after = strtod(text, pos)
  if not value then return 'T_ERROR', TEXT.invalid_number end
  pos = after
  return 'T_NUMBER', value
end

-- json_next_token: the next token's type and value (an error token's value
-- is what is wrong), its start in `token_at`.
local function next_token()
  local _, last = find(text, '^[ \t\n\r]*', pos)
  pos = last + 1
  token_at = pos
  local c = sub(text, pos, pos)
  if c == '' then return 'T_END' end
  local single = SINGLE[c]
  if single then
    pos = pos + 1
    return single
  end
  if c == '"' then return string_token() end
  local invalid_allowed = cfg_in_use.decode_invalid_numbers == 1
  if c == '-' or find(c, '^%d') then
    if not invalid_allowed and is_invalid_number() then return 'T_ERROR', TEXT.invalid_number end
    return number_token()
  end
  if sub(text, pos, pos + 3) == 'true' then
    pos = pos + 4
    return 'T_BOOLEAN', true
  elseif sub(text, pos, pos + 4) == 'false' then
    pos = pos + 5
    return 'T_BOOLEAN', false
  elseif sub(text, pos, pos + 3) == 'null' then
    pos = pos + 4
    return 'T_NULL'
  end
  -- (Only '+', inf and nan get here as invalid numbers.)
  if invalid_allowed and is_invalid_number() then return number_token() end
  return 'T_ERROR', TEXT.invalid_token
end

-- A decode that fails lets go of its text first: the upvalue would keep the
-- whole input alive (counted in used_memory_lua) until the next decode.
local function parse_error(expected, kind, value)
  text = nil
  raise(format(TEXT.expected, expected, kind == 'T_ERROR' and value or kind, token_at))
end

-- json_decode_descend: one more array or object opens. `top` is the height
-- of lua-cjson's C stack before its table is pushed; `slots` what it asks
-- lua_checkstack for.
local function descend(top, slots)
  depth = depth + 1
  if depth > cfg_in_use.decode_max_depth or top + slots > MAXCSTACK then
    text = nil
    raise(format(TEXT.decode_nesting, depth, pos - 1))
  end
end

-- The value starting with the token (kind, value); `top` as in descend.
local function parse_value(kind, value, top)
  if kind == 'T_STRING' or kind == 'T_NUMBER' or kind == 'T_BOOLEAN' then
    return value
  elseif kind == 'T_NULL' then
    return null
  elseif kind == 'T_ARR_BEGIN' then
    -- (The array, then each element in turn, on the C stack.)
    descend(top, 2)
    local array = {}
    kind, value = next_token()
    local i = 1
    if kind ~= 'T_ARR_END' then
      while true do
        array[i] = parse_value(kind, value, top + 1)
        kind, value = next_token()
        if kind == 'T_ARR_END' then break end
        if kind ~= 'T_COMMA' then parse_error('comma or array end', kind, value) end
        kind, value = next_token()
        i = i + 1
      end
    end
    depth = depth - 1
    return array
  elseif kind == 'T_OBJ_BEGIN' then
    -- (The object, then each key and value in turn, on the C stack.)
    descend(top, 3)
    local object = {}
    kind, value = next_token()
    if kind ~= 'T_OBJ_END' then
      while true do
        if kind ~= 'T_STRING' then parse_error('object key string', kind, value) end
        local key = value
        kind, value = next_token()
        if kind ~= 'T_COLON' then parse_error('colon', kind, value) end
        kind, value = next_token()
        object[key] = parse_value(kind, value, top + 2)
        kind, value = next_token()
        if kind == 'T_OBJ_END' then break end
        if kind ~= 'T_COMMA' then parse_error('comma or object end', kind, value) end
        kind, value = next_token()
      end
    end
    depth = depth - 1
    return object
  end
  parse_error('value', kind, value)
end

local function decode(cfg, ...)
  if select('#', ...) ~= 1 then bad_argument(1, TEXT.one_argument) end
  local json = ...
  -- luaL_checklstring: a number is read as its text.
  if type(json) == 'number' then
    json = tostring(json)
  elseif type(json) ~= 'string' then
    bad_argument(1, format(TEXT.wrong_type, 'string', type(json)))
  end
  if #json >= 2 and (byte(json, 1) == 0 or byte(json, 2) == 0) then raise(TEXT.utf16) end
  local nul = find(json, '%z')
  text, pos, cfg_in_use, depth = nul and sub(json, 1, nul - 1) or json, 1, cfg, 0
  local kind, value = next_token()
  local result = parse_value(kind, value, 1)
  kind, value = next_token()
  if kind ~= 'T_END' then parse_error('the end', kind, value) end
  text = nil
  return result
end

---------------------------------------------------------------- instances

local function create(cfg)
  if not cfg then
    cfg = {}
    set_defaults(cfg)
  end
  -- The entry calls f(cfg, ...).
  local function bind(f)
    return wrap(f, cfg)
  end
  local cjson = {
    encode = bind(encode),
    decode = bind(decode),
    encode_sparse_array = bind(encode_sparse_array),
    encode_max_depth = bind(encode_max_depth),
    decode_max_depth = bind(decode_max_depth),
    encode_number_precision = bind(encode_number_precision),
    encode_keep_buffer = bind(encode_keep_buffer),
    encode_invalid_numbers = bind(encode_invalid_numbers),
    decode_invalid_numbers = bind(decode_invalid_numbers),
    new = bind(function() return (create(nil)) end),
    null = null,
    _NAME = 'cjson',
    _VERSION = '2.1.0',
  }
  return cjson, cfg
end

return create

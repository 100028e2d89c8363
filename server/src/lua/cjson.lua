-- cjson for coordis scripts: the subset of lua-cjson 2.1 that Redis scripts
-- use (encode, decode, null), in Lua so that it runs in the same VM and
-- walks tables in the same order lua-cjson does. Numbers are printed with
-- "%.14g", "/" is escaped, empty tables encode as {}, sparse arrays error.
local null = ...
local select, type, pairs, tostring, tonumber, error, format, byte, char, sub, gsub, find, floor, concat, huge =
      select, type, pairs, tostring, tonumber, error, string.format, string.byte, string.char, string.sub,
      string.gsub, string.find, math.floor, table.concat, math.huge

local escapes = { ['"'] = '\\"', ['\\'] = '\\\\', ['/'] = '\\/', ['\b'] = '\\b', ['\f'] = '\\f',
                  ['\n'] = '\\n', ['\r'] = '\\r', ['\t'] = '\\t' }
local function escape_char(c)
  return escapes[c] or format('\\u%04x', byte(c))
end
local function encode_string(s)
  return '"' .. gsub(s, '[%z\1-\31"\\/\127]', escape_char) .. '"'
end

local function encode_number(n)
  if n ~= n or n == huge or n == -huge then
    error("Cannot serialise number: must not be NaN or Inf", 0)
  end
  return format('%.14g', n)
end

-- lua-cjson's lua_array_length: the array size, or -1 for an object.
local function array_length(t)
  local max, items = 0, 0
  for k in pairs(t) do
    if type(k) == 'number' and k > 0 and floor(k) == k then
      if k > max then max = k end
      items = items + 1
    else
      return -1
    end
  end
  if max > 10 and max > items * 2 then
    error("Cannot serialise table: excessively sparse array", 0)
  end
  return max
end

local encode_value
local function encode_table(t, depth)
  if depth > 1000 then
    error(format("Cannot serialise, excessive nesting (%d)", depth), 0)
  end
  local len = array_length(t)
  local out = {}
  if len > 0 then
    for i = 1, len do out[i] = encode_value(t[i], depth) end
    return '[' .. concat(out, ',') .. ']'
  end
  for k, v in pairs(t) do
    local key
    if type(k) == 'string' then key = encode_string(k)
    elseif type(k) == 'number' then key = '"' .. encode_number(k) .. '"'
    else error("Cannot serialise " .. type(k) .. ": table key must be a number or string", 0) end
    out[#out + 1] = key .. ':' .. encode_value(v, depth)
  end
  return '{' .. concat(out, ',') .. '}'
end

encode_value = function(v, depth)
  local t = type(v)
  if t == 'string' then return encode_string(v)
  elseif t == 'number' then return encode_number(v)
  elseif t == 'boolean' then return tostring(v)
  elseif t == 'nil' or v == null then return 'null'
  elseif t == 'table' then return encode_table(v, depth + 1)
  end
  error("Cannot serialise " .. t .. ": type not supported", 0)
end

local decode_value

-- The name lua-cjson gives the token at `pos` in its error messages.
local function token_name(text, pos)
  local c = sub(text, pos, pos)
  if c == '' then return 'T_END' end
  if c == '{' then return 'T_OBJ_BEGIN' elseif c == '}' then return 'T_OBJ_END'
  elseif c == '[' then return 'T_ARR_BEGIN' elseif c == ']' then return 'T_ARR_END'
  elseif c == ',' then return 'T_COMMA' elseif c == ':' then return 'T_COLON'
  elseif c == '"' then return 'T_STRING'
  elseif find(c, '[-0-9]') then return 'T_NUMBER'
  elseif sub(text, pos, pos + 3) == 'true' or sub(text, pos, pos + 4) == 'false' then return 'T_BOOLEAN'
  elseif sub(text, pos, pos + 3) == 'null' then return 'T_NULL'
  end
  return 'invalid token'
end

local function decode_error(what, text, pos)
  error(format("Expected %s but found %s at character %d", what, token_name(text, pos), pos), 0)
end

local function skip(text, pos)
  local _, e = find(text, '^[ \t\r\n]*', pos)
  return e + 1
end

local function utf8(cp)
  if cp < 0x80 then return char(cp)
  elseif cp < 0x800 then return char(0xC0 + floor(cp / 64), 0x80 + cp % 64)
  elseif cp < 0x10000 then return char(0xE0 + floor(cp / 4096), 0x80 + floor(cp / 64) % 64, 0x80 + cp % 64)
  end
  return char(0xF0 + floor(cp / 262144), 0x80 + floor(cp / 4096) % 64, 0x80 + floor(cp / 64) % 64, 0x80 + cp % 64)
end

local simple = { b = '\b', f = '\f', n = '\n', r = '\r', t = '\t', ['"'] = '"', ['\\'] = '\\', ['/'] = '/' }

local function decode_string(text, pos)
  local out, i = {}, pos + 1
  while true do
    local c = sub(text, i, i)
    if c == '' then error("Expected object key string but found unexpected end of string at character " .. i, 0) end
    if c == '"' then return concat(out), i + 1 end
    if c == '\\' then
      local e = sub(text, i + 1, i + 1)
      if simple[e] then
        out[#out + 1] = simple[e]; i = i + 2
      elseif e == 'u' then
        local cp = tonumber(sub(text, i + 2, i + 5), 16)
        if not cp then error("Expected value but found invalid unicode escape code at character " .. i, 0) end
        i = i + 6
        if cp >= 0xD800 and cp <= 0xDBFF and sub(text, i, i + 1) == '\\u' then
          local lo = tonumber(sub(text, i + 2, i + 5), 16)
          if lo and lo >= 0xDC00 and lo <= 0xDFFF then
            cp = 0x10000 + (cp - 0xD800) * 1024 + (lo - 0xDC00); i = i + 6
          end
        end
        out[#out + 1] = utf8(cp)
      else
        error("Expected value but found invalid escape code at character " .. (i + 1), 0)
      end
    else
      out[#out + 1] = c; i = i + 1
    end
  end
end

decode_value = function(text, pos, depth)
  if depth > 1000 then error(format("Found too many nested data structures (%d) at character %d", depth, pos), 0) end
  pos = skip(text, pos)
  local c = sub(text, pos, pos)
  if c == '{' then
    local obj = {}
    pos = skip(text, pos + 1)
    if sub(text, pos, pos) == '}' then return obj, pos + 1 end
    while true do
      pos = skip(text, pos)
      if sub(text, pos, pos) ~= '"' then decode_error("object key string", text, pos) end
      local key; key, pos = decode_string(text, pos)
      pos = skip(text, pos)
      if sub(text, pos, pos) ~= ':' then decode_error("colon", text, pos) end
      local v; v, pos = decode_value(text, pos + 1, depth + 1)
      obj[key] = v
      pos = skip(text, pos)
      local d = sub(text, pos, pos)
      if d == '}' then return obj, pos + 1 end
      if d ~= ',' then decode_error("comma or object end", text, pos) end
      pos = pos + 1
    end
  elseif c == '[' then
    local arr, n = {}, 0
    pos = skip(text, pos + 1)
    if sub(text, pos, pos) == ']' then return arr, pos + 1 end
    while true do
      local v; v, pos = decode_value(text, pos, depth + 1)
      n = n + 1; arr[n] = v
      pos = skip(text, pos)
      local d = sub(text, pos, pos)
      if d == ']' then return arr, pos + 1 end
      if d ~= ',' then decode_error("comma or array end", text, pos) end
      pos = pos + 1
    end
  elseif c == '"' then
    return decode_string(text, pos)
  elseif sub(text, pos, pos + 3) == 'true' then return true, pos + 4
  elseif sub(text, pos, pos + 4) == 'false' then return false, pos + 5
  elseif sub(text, pos, pos + 3) == 'null' then return null, pos + 4
  end
  local _, e = find(text, '^-?%d+%.?%d*[eE]?[-+]?%d*', pos)
  if e then
    local n = tonumber(sub(text, pos, e))
    if n then return n, e + 1 end
  end
  decode_error("value", text, pos)
end

-- encode/decode are wrapped by Rust functions (see sandbox.rs), which add
-- the calling script's position to errors as lua-cjson's C functions do.
local function encode(...)
  if select('#', ...) ~= 1 then error("bad argument #1 to 'encode' (expected 1 argument)", 0) end
  return encode_value(..., 0)
end
local function decode(...)
  if select('#', ...) ~= 1 then error("bad argument #1 to 'decode' (expected 1 argument)", 0) end
  local text = ...
  if type(text) ~= 'string' then error("bad argument #1 to 'decode' (string expected, got " .. type(text) .. ")", 0) end
  local v, pos = decode_value(text, 1, 0)
  pos = skip(text, pos)
  if pos <= #text then decode_error("the end", text, pos) end
  return v
end
return encode, decode

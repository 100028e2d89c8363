//! LOLWUT [VERSION v] [args...]: computer art and the version, as Redis
//! 7.0.15 draws it. Version 5 is Georg Nees's *Schotter* (squares that turn
//! and drift more from row to row, drawn with Bresenham lines on a canvas
//! rendered as Braille characters); version 6 a skyline of skyscrapers in
//! four grays (terminal colour escapes); any other version just the
//! version line. The randomness both draw with comes from a generator of
//! their own, seeded at start as Redis seeds `rand()`; the parts Redis
//! draws without it (Schotter's first two rows, a one-row skyline) are
//! the same bytes as Redis's.

use std::f64::consts::PI;

use bytes::Bytes;

use super::args::{int, is};
use super::flags::*;
use super::{CommandSpec, Ctx};
use crate::protocol::Reply;

#[rustfmt::skip]
pub(crate) static COMMANDS: &[CommandSpec] = &[
    command!("server", "lolwut", -1, READONLY | FAST, 0, "Display some computer art and the Redis version", lolwut),
];

/// Redis's `RAND_MAX` (glibc): the generator's values are `0..=RAND_MAX`.
const RAND_MAX: u32 = i32::MAX as u32;

/// Schotter's defaults: console columns, squares per row and per column.
const SCHOTTER_DEFAULTS: (i64, i64, i64) = (66, 8, 12);
/// The skyline's defaults: columns and rows.
const SKYLINE_DEFAULTS: (i64, i64) = (80, 20);
/// Redis's bounds on the console columns and rows (both versions).
const MAX_CELLS: i64 = 1000;
/// Redis's bound on Schotter's squares per row and per column.
const MAX_SQUARES: i64 = 200;

fn lolwut(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    // `VERSION v` comes first or not at all; the version's own arguments follow.
    let (version, rest) = if args.len() >= 3 && is(&args[1], "version") {
        match int(&args[2]) {
            // Redis prints the version as an unsigned int ("%u.0.0").
            Ok(v) => (Some(v as u32), &args[3..]),
            Err(e) => return e,
        }
    } else {
        (None, &args[1..])
    };
    let seed = ctx.now ^ u64::from(std::process::id());
    let mut text = match version {
        Some(5) => match numbers(rest, 3) {
            Ok(n) => {
                let (cols, per_row, per_col) = (
                    n.first().copied().unwrap_or(SCHOTTER_DEFAULTS.0),
                    n.get(1).copied().unwrap_or(SCHOTTER_DEFAULTS.1),
                    n.get(2).copied().unwrap_or(SCHOTTER_DEFAULTS.2),
                );
                let mut rng = Rand::new(seed);
                let canvas = schotter(
                    cols.clamp(1, MAX_CELLS) as i32,
                    per_row.clamp(1, MAX_SQUARES) as i32,
                    per_col.clamp(1, MAX_SQUARES) as i32,
                    &mut rng,
                );
                let mut text = canvas.braille();
                text.push_str("\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. ");
                text
            }
            Err(e) => return e,
        },
        Some(6) => match numbers(rest, 2) {
            Ok(n) => {
                let cols = n.first().copied().unwrap_or(SKYLINE_DEFAULTS.0);
                let rows = n.get(1).copied().unwrap_or(SKYLINE_DEFAULTS.1);
                let mut canvas = Canvas::new(cols.clamp(1, MAX_CELLS) as i32, rows.clamp(1, MAX_CELLS) as i32, WHITE);
                skyline(&mut canvas, &mut Rand::new(seed));
                let mut text = canvas.grays();
                text.push_str(
                    "\nDedicated to the 8 bit game developers of past and present.\n\
                     Original 8 bit image from Plaguemon by hikikomori. Redis ver. ",
                );
                text
            }
            Err(e) => return e,
        },
        _ => "Redis ver. ".to_string(),
    };
    text.push_str(crate::REDIS_VERSION);
    text.push('\n');
    Reply::Verbatim(*b"txt", Bytes::from(text))
}

/// The first `n` arguments as integers (Redis reads them in order and
/// stops at the first that is not one).
fn numbers(args: &[Bytes], n: usize) -> Result<Vec<i64>, Reply> {
    args.iter().take(n).map(|a| int(a)).collect()
}

/// A small generator standing in for C's `rand()`: the art's randomness
/// differs from Redis's run to run anyway (Redis seeds from time and pid).
struct Rand(u64);

impl Rand {
    fn new(seed: u64) -> Rand {
        // splitmix64's constant, so that a seed of 0 still moves.
        Rand(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    /// The next value in `0..=RAND_MAX` (xorshift64*).
    fn next(&mut self) -> i32 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        ((x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as u32 & RAND_MAX) as i32
    }
}

/// The skyline's colours: black, two grays, white.
const BLACK: u8 = 0;
const GRAY_DARK: u8 = 1;
const GRAY_LIGHT: u8 = 2;
const WHITE: u8 = 3;

/// A grid of pixels, each a colour (or on/off for Schotter); reading
/// outside it gives 0 and drawing there does nothing, as Redis's canvas.
struct Canvas {
    width: i32,
    height: i32,
    pixels: Vec<u8>,
}

impl Canvas {
    fn new(width: i32, height: i32, color: u8) -> Canvas {
        Canvas {
            width,
            height,
            pixels: vec![color; width as usize * height as usize],
        }
    }

    fn inside(&self, x: i32, y: i32) -> bool {
        (0..self.width).contains(&x) && (0..self.height).contains(&y)
    }

    fn set(&mut self, x: i32, y: i32, color: u8) {
        if self.inside(x, y) {
            self.pixels[(x + y * self.width) as usize] = color;
        }
    }

    fn get(&self, x: i32, y: i32) -> u8 {
        if self.inside(x, y) {
            self.pixels[(x + y * self.width) as usize]
        } else {
            0
        }
    }

    /// Bresenham's line from (x1, y1) to (x2, y2), both ends included.
    fn line(&mut self, mut x1: i32, mut y1: i32, x2: i32, y2: i32, color: u8) {
        let (dx, dy) = ((x2 - x1).abs(), (y2 - y1).abs());
        let (sx, sy) = (if x1 < x2 { 1 } else { -1 }, if y1 < y2 { 1 } else { -1 });
        let mut err = dx - dy;
        loop {
            self.set(x1, y1, color);
            if x1 == x2 && y1 == y2 {
                break;
            }
            let e2 = err * 2;
            if e2 > -dy {
                err -= dy;
                x1 += sx;
            }
            if e2 < dx {
                err += dx;
                y1 += sy;
            }
        }
    }

    /// A square of side `size` centred on (x, y), turned by `angle`: its
    /// corners on the circle through them, in single precision as Redis
    /// computes them.
    fn square(&mut self, x: i32, y: i32, size: f32, angle: f32, color: u8) {
        // A square inscribed in a circle of radius 1 has sides of sqrt(2),
        // which Redis writes to ten decimals: the same digits round alike.
        #[allow(clippy::approx_constant)] // Redis's digits, deliberately.
        const SQRT_2_AS_REDIS: f64 = 1.4142135623;
        let size = ((f64::from(size) / SQRT_2_AS_REDIS) as f32).round();
        let mut k = (PI / 4.0 + f64::from(angle)) as f32;
        let mut corners = [(0i32, 0i32); 4];
        for corner in &mut corners {
            let k64 = f64::from(k);
            *corner = (
                (k64.sin() * f64::from(size) + f64::from(x)).round() as i32,
                (k64.cos() * f64::from(size) + f64::from(y)).round() as i32,
            );
            k = (k64 + PI / 2.0) as f32;
        }
        for j in 0..4 {
            let ((x1, y1), (x2, y2)) = (corners[j], corners[(j + 1) % 4]);
            self.line(x1, y1, x2, y2, color);
        }
    }

    /// Each 2x4 block of pixels as one Braille character (U+2800 plus the
    /// block's dots), rows of blocks separated by newlines as Redis puts
    /// them (after every row but one starting at the last pixel row).
    fn braille(&self) -> String {
        /// (dx, dy, bit) of each dot in a Braille cell.
        const DOTS: [(i32, i32, u32); 8] = [
            (0, 0, 0),
            (0, 1, 1),
            (0, 2, 2),
            (1, 0, 3),
            (1, 1, 4),
            (1, 2, 5),
            (0, 3, 6),
            (1, 3, 7),
        ];
        const BRAILLE_BASE: u32 = 0x2800;
        let mut text = String::new();
        for y in (0..self.height).step_by(4) {
            for x in (0..self.width).step_by(2) {
                let dots = DOTS
                    .iter()
                    .filter(|&&(dx, dy, _)| self.get(x + dx, y + dy) != 0)
                    .fold(0, |byte, &(_, _, bit)| byte | (1 << bit));
                text.push(char::from_u32(BRAILLE_BASE + dots).expect("a Braille character"));
            }
            if y != self.height - 1 {
                text.push('\n');
            }
        }
        text
    }

    /// Each pixel as a space with its gray as foreground and background
    /// (terminal colour escapes), rows separated by newlines.
    fn grays(&self) -> String {
        let mut text = String::new();
        for y in 0..self.height {
            for x in 0..self.width {
                let escape = match self.get(x, y) {
                    GRAY_DARK => "0;90;100m",
                    GRAY_LIGHT => "0;37;47m",
                    WHITE => "0;97;107m",
                    _ => "0;30;40m",
                };
                text.push_str("\x1b[");
                text.push_str(escape);
                text.push_str(" \x1b[0m");
            }
            if y != self.height - 1 {
                text.push('\n');
            }
        }
        text
    }
}

/// Schotter on a canvas twice `cols` wide (two pixels per character):
/// rows of squares, turned and moved at random more and more from the
/// third row down.
fn schotter(cols: i32, per_row: i32, per_col: i32, rng: &mut Rand) -> Canvas {
    let width = cols * 2;
    let padding = if width > 4 { 2 } else { 0 };
    let side = (width - padding * 2) as f32 / per_row as f32;
    let height = (side * per_col as f32 + (padding * 2) as f32) as i32;
    let mut canvas = Canvas::new(width, height, 0);
    for y in 0..per_col {
        // A random factor up to y / per_col (Redis draws three, then their signs).
        let factor = |rng: &mut Rand| rng.next() as f32 / RAND_MAX as f32 / per_col as f32 * y as f32;
        for x in 0..per_row {
            let mut sx = (x as f32 * side + side / 2.0 + padding as f32) as i32;
            let mut sy = (y as f32 * side + side / 2.0 + padding as f32) as i32;
            let mut angle = 0.0f32;
            if y > 1 {
                let mut r = [factor(rng), factor(rng), factor(rng)];
                for r in &mut r {
                    if rng.next() % 2 == 1 {
                        *r = -*r;
                    }
                }
                angle = r[0];
                sx = (sx as f32 + r[1] * side / 3.0) as i32;
                sy = (sy as f32 + r[2] * side / 3.0) as i32;
            }
            canvas.square(sx, sy, side, angle, 1);
        }
    }
    canvas
}

/// One skyscraper: where it stands, its size, whether it has windows,
/// its colour.
struct Skyscraper {
    xoff: i32,
    width: i32,
    height: i32,
    windows: bool,
    color: u8,
}

/// Draws `s` standing on the canvas's bottom row: a roof two pixels
/// narrower on each side, and windows (two pixels wide, one tall, in a
/// random gray other than the wall's) inside its borders.
fn skyscraper(canvas: &mut Canvas, s: &Skyscraper, rng: &mut Rand) {
    let start = canvas.height - 1;
    let end = start - s.height + 1;
    let mut y = start;
    while y >= end {
        for x in s.xoff..s.xoff + s.width {
            if y == end && (x <= s.xoff + 1 || x >= s.xoff + s.width - 2) {
                continue;
            }
            let mut color = s.color;
            if s.windows && x > s.xoff + 1 && x < s.xoff + s.width - 2 && y > end + 1 && y < start - 1 {
                let (relx, rely) = (x - (s.xoff + 1), y - (end + 1));
                if (relx / 2) % 2 != 0 && rely % 2 != 0 {
                    loop {
                        color = 1 + (rng.next() % 2) as u8;
                        if color != s.color {
                            break;
                        }
                    }
                    // Both pixels of a window get the same gray.
                    if relx % 2 != 0 {
                        color = canvas.get(x - 1, y);
                    }
                }
            }
            canvas.set(x, y, color);
        }
        y -= 1;
    }
}

/// The skyline: two rows of background skyscrapers without windows (the
/// lighter gray behind), then black ones with windows in front.
fn skyline(canvas: &mut Canvas, rng: &mut Rand) {
    /// Where the first skyscraper of a row may start (off the left edge).
    const FIRST_OFFSET: i32 = -10;
    let h = canvas.height;
    for color in [GRAY_LIGHT, GRAY_DARK] {
        let mut offset = FIRST_OFFSET;
        while offset < canvas.width {
            offset += rng.next() % 8;
            let width = 10 + rng.next() % 9;
            let height = if color == GRAY_LIGHT {
                h / 2 + (rng.next() % h) / 2
            } else {
                h / 2 + (rng.next() % h) / 3
            };
            let s = Skyscraper {
                xoff: offset,
                width,
                height,
                windows: false,
                color,
            };
            skyscraper(canvas, &s, rng);
            offset += if color == GRAY_LIGHT { width / 2 } else { width + 1 };
        }
    }
    let mut offset = FIRST_OFFSET;
    while offset < canvas.width {
        offset += rng.next() % 8;
        let mut width = 5 + rng.next() % 14;
        if width % 4 != 0 {
            width += width % 3;
        }
        let height = h / 3 + (rng.next() % h) / 2;
        let s = Skyscraper {
            xoff: offset,
            width,
            height,
            windows: true,
            color: BLACK,
        };
        skyscraper(canvas, &s, rng);
        offset += width + 5;
    }
}

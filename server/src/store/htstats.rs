//! DEBUG HTSTATS and DEBUG HTSTATS-KEY: a report on one of coordis's hash
//! tables, in the shape of Redis's `dictGetStats` (its lines, labels and
//! number formats), with the figures of the table coordis really has.
//!
//! Redis's dict chains the entries whose hashes meet in one slot. coordis's
//! tables (hashbrown's SwissTable) are open-addressed: an entry whose slot
//! is taken goes to another free slot, so a slot holds one entry or none.
//! Counted slot by slot, as Redis counts, `table size` is the table's slot
//! count, `different slots` its occupied slots and every chain is one
//! entry long. A SwissTable grows or shrinks in one step, never
//! incrementally, so there is no second table ("rehashing target") to
//! show.

use std::fmt::Write;

use hashbrown::HashTable;

/// Redis's report of a dictionary with no element (whatever its size).
pub(crate) const EMPTY: &str = "Hash table 0 stats (main hash table):\nNo stats available for empty dictionaries\n";

/// The report on `table` (see the module docs).
pub(crate) fn report<T>(table: &HashTable<T>) -> String {
    let elements = table.len();
    if elements == 0 {
        return EMPTY.to_owned();
    }
    let size = table.num_buckets();
    // How many slots hold 0 entries and how many hold 1: a slot of an
    // open-addressed table holds no more.
    let mut chains = [0usize; 2];
    for slot in 0..size {
        chains[usize::from(table.get_bucket(slot).is_some())] += 1;
    }
    let slots = chains[1];
    let counted: usize = chains.iter().enumerate().map(|(len, n)| len * n).sum();
    let longest = chains.iter().rposition(|&n| n > 0).unwrap_or(0);
    // Redis computes these in single precision and prints them with %.02f.
    let mut out = format!(
        "Hash table 0 stats (main hash table):\n \
         table size: {size}\n \
         number of elements: {elements}\n \
         different slots: {slots}\n \
         max chain length: {longest}\n \
         avg chain length (counted): {:.2}\n \
         avg chain length (computed): {:.2}\n \
         Chain length distribution:\n",
        counted as f32 / slots as f32,
        elements as f32 / slots as f32,
    );
    for (len, &n) in chains.iter().enumerate().filter(|(_, &n)| n > 0) {
        let share = n as f32 / size as f32 * 100.0;
        let _ = writeln!(out, "   {len}: {n} ({share:.2}%)");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(v: &u64) -> u64 {
        v.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    fn table(n: u64) -> HashTable<u64> {
        let mut t = HashTable::new();
        for i in 0..n {
            t.insert_unique(hash(&i), i, hash);
        }
        t
    }

    #[test]
    fn an_empty_table_has_redis_s_words() {
        assert_eq!(report(&table(0)), EMPTY);
        let mut emptied = table(10);
        emptied.clear();
        assert_eq!(report(&emptied), EMPTY, "a table with slots but no element");
    }

    #[test]
    fn the_figures_are_the_table_s_own() {
        // 100 entries: hashbrown keeps a table at most 7/8 full, in powers
        // of two, so 128 slots, 28 of them free. 21.875 and 78.125 round
        // to even, as C's printf rounds them.
        let t = table(100);
        assert_eq!(t.num_buckets(), 128);
        assert_eq!(
            report(&t),
            "Hash table 0 stats (main hash table):\n table size: 128\n number of elements: 100\n \
             different slots: 100\n max chain length: 1\n avg chain length (counted): 1.00\n \
             avg chain length (computed): 1.00\n Chain length distribution:\n   0: 28 (21.88%)\n   \
             1: 100 (78.12%)\n"
        );
    }

    #[test]
    fn a_shrunk_table_reports_its_new_size() {
        let mut t = table(1000);
        let grown = t.num_buckets();
        for i in 10..1000 {
            t.find_entry(hash(&i), |&v| v == i).ok().unwrap().remove();
        }
        assert!(report(&t).contains(&format!(" table size: {grown}\n number of elements: 10\n")));
        t.shrink_to_fit(hash);
        let shrunk = t.num_buckets();
        assert!(shrunk < grown && shrunk >= 10, "{shrunk}");
        assert!(report(&t).contains(&format!(" table size: {shrunk}\n number of elements: 10\n")));
    }
}

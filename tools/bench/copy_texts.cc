// The copy workload's documents (copy_workload.h): written for Vosti's benchmark, not taken from
// anywhere. Each is short enough that a small model's answer fits in a few hundred tokens, and
// each instruction asks for an answer that repeats most of the document with small changes.
#include "tools/bench/copy_workload.h"

namespace vosti::bench {
namespace {

const CopyDocument kDocuments[] = {
    {"python-moving-average",
     "python",
     R"~(def moving_average(values, window):
    if window <= 0:
        raise ValueError("window must be positive")
    result = []
    total = 0.0
    for i, x in enumerate(values):
        total += x
        if i >= window:
            total -= values[i - window]
        if i >= window - 1:
            result.append(total / window)
    return result)~",
     {"Rename the variable `window` to `span` in this function. Reply with the complete function and nothing else.",
      "Add a docstring to this function that says what it returns. Reply with the complete function.",
      "Add type hints to this function (values is a list of floats). Change nothing else and reply with the "
      "whole function."}},
    {"python-parse-config",
     "python",
     R"~(def parse_config(lines):
    config = {}
    section = "default"
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            config.setdefault(section, {})
            continue
        key, _, value = line.partition("=")
        config.setdefault(section, {})[key.strip()] = value.strip()
    return config)~",
     {"Rename the variable `section` to `current_section` everywhere in this function. Reply with the whole "
      "function.",
      "Add a comment above each `if` statement explaining what it checks. Reply with the complete code.",
      "Copy this function exactly, but make it skip lines that start with `;` as well as `#`."}},
    {"cpp-ring-buffer",
     "cpp",
     R"~(template <typename T, size_t N>
class RingBuffer {
 public:
  bool push(const T& item) {
    if (count_ == N) return false;
    items_[(head_ + count_) % N] = item;
    ++count_;
    return true;
  }
  bool pop(T& out) {
    if (count_ == 0) return false;
    out = items_[head_];
    head_ = (head_ + 1) % N;
    --count_;
    return true;
  }
  size_t size() const { return count_; }

 private:
  std::array<T, N> items_{};
  size_t head_ = 0;
  size_t count_ = 0;
};)~",
     {"Rename the member `head_` to `read_pos_` in this class. Reply with the complete class and nothing else.",
      "Add a one-line comment above each public method of this class. Reply with the whole class.",
      "Add a method `bool empty() const` after `size()`. Reply with the complete class."}},
    {"js-cart-total",
     "javascript",
     R"~(function cartTotal(items, coupon) {
  let subtotal = 0;
  for (const item of items) {
    if (item.quantity <= 0) continue;
    subtotal += item.price * item.quantity;
  }
  let discount = 0;
  if (coupon && coupon.percent) {
    discount = subtotal * coupon.percent / 100;
  }
  const shipping = subtotal - discount >= 50 ? 0 : 4.99;
  return Math.round((subtotal - discount + shipping) * 100) / 100;
})~",
     {"Rename the variable `subtotal` to `itemsTotal` in this function. Reply with the complete function.",
      "Add a JSDoc comment to this function describing its parameters. Reply with the whole function.",
      "Convert this function to an arrow function assigned to a const. Keep the body the same."}},
    {"go-word-count",
     "go",
     R"~(func wordCounts(text string) map[string]int {
	counts := make(map[string]int)
	word := strings.Builder{}
	flush := func() {
		if word.Len() > 0 {
			counts[strings.ToLower(word.String())]++
			word.Reset()
		}
	}
	for _, r := range text {
		if unicode.IsLetter(r) || r == '\'' {
			word.WriteRune(r)
		} else {
			flush()
		}
	}
	flush()
	return counts
})~",
     {"Rename the variable `counts` to `freq` in this Go function. Reply with the complete function.",
      "Add a doc comment above this Go function. Reply with the whole function and nothing else.",
      "Copy this function, changing only its name to `countWords`."}},
    {"sql-report",
     "sql",
     R"~(SELECT c.region,
       COUNT(DISTINCT o.customer_id) AS customers,
       SUM(o.amount) AS revenue,
       AVG(o.amount) AS average_order
FROM orders AS o
JOIN customers AS c ON c.id = o.customer_id
WHERE o.status = 'shipped'
  AND o.created_at >= DATE '2024-01-01'
GROUP BY c.region
HAVING SUM(o.amount) > 1000
ORDER BY revenue DESC;)~",
     {"Rename the alias `o` to `ord` everywhere in this query. Reply with the complete query.",
      "Add a comment line above the query that says what it reports. Reply with the whole query.",
      "Change the date to 2025-01-01 and reply with the complete query, otherwise unchanged."}},
    {"prose-mill",
     "text",
     R"~(The old mill stands where the river bends twice before reaching the town. It was built from grey stone
quarried on the hill above, and its wheel turned for almost two hundred years. In dry summers the
river ran so low that the miller ground flour only at night, when the upstream ponds had refilled.
The last miller, a woman named Ada Pell, kept a ledger of every sack she sold, and the ledger now
sits in the town library. The wheel was repaired in 1987 by volunteers, who found the original oak
axle still sound. Today the building is a small museum, and on the first Sunday of each month the
wheel turns again for visitors while the river carries its water back toward the sea.)~",
     {"Copy, word for word, every sentence of this passage that mentions the river.",
      "Repeat this passage exactly, with each sentence on its own line.",
      "Copy this passage, replacing the name Ada Pell with Mara Lind and changing nothing else."}},
    {"notes-meeting",
     "text",
     R"~(Planning meeting, Tuesday
- Priya: the staging cluster runs out of disk on Fridays; she will add a cleanup job.
- Tom: release 4.2 is blocked on the login bug; fix expected Thursday.
- Priya: customer survey results are in; 62% want dark mode.
- Lena: new laptops arrive next week; old ones go to the test lab.
- Tom: the on-call rotation changes to two-week shifts from next month.
- Priya: the docs site moves to the new domain on the 14th.
- Lena: budget review moved to Monday at 10:00.)~",
     {"Copy the lines of these notes that mention Priya, exactly as they are.",
      "Copy the lines of these notes that mention Tom, exactly as they are.",
      "Rewrite these notes with the names in bold (Markdown **Name**), keeping every line otherwise unchanged."}},
    {"log-service",
     "text",
     R"~(2024-05-03 09:14:02 INFO  api     started on port 8080
2024-05-03 09:14:05 INFO  db      connected to primary (pool size 16)
2024-05-03 09:20:41 WARN  api     slow request GET /orders took 2.4s
2024-05-03 09:21:10 ERROR db      query timeout after 5000 ms on table orders
2024-05-03 09:21:11 INFO  api     retrying request GET /orders
2024-05-03 09:22:37 ERROR api     upstream payment service returned 503
2024-05-03 09:25:00 INFO  cron    nightly export scheduled for 02:00
2024-05-03 09:31:54 WARN  db      replica lag 12s
2024-05-03 09:40:12 ERROR api     request POST /checkout failed: payment declined)~",
     {"Copy every line of this log that contains ERROR, exactly as it appears.",
      "Copy every line of this log from the api service, exactly as it appears.",
      "Repeat this log with the date removed from the start of every line."}},
    {"json-inventory",
     "json",
     R"~({"store":"north","updated":"2024-06-01","items":[{"sku":"A-100","name":"desk lamp","price":24.5,"stock":12},{"sku":"A-101","name":"bulb pack","price":6.25,"stock":140},{"sku":"B-220","name":"office chair","price":149.0,"stock":3},{"sku":"C-310","name":"notebook","price":2.75,"stock":0}],"currency":"EUR"})~",
     {"Reformat this JSON with two-space indentation, keeping every key and value as it is.",
      "Copy this JSON but remove the items whose stock is 0. Keep everything else unchanged.",
      "Rewrite this JSON with the key \"stock\" renamed to \"quantity\" in every item."}},
    {"csv-stations",
     "csv",
     R"~(station,city,elevation_m,opened
Alder Cross,Brookfield,112,1968
Birch Hollow,Brookfield,98,1972
Cedar Point,Lakeview,241,1985
Dover Street,Lakeview,203,1991
Elm Terrace,Northgate,56,2003
Fenwick Park,Northgate,61,2010)~",
     {"Convert this CSV table to JSON Lines, one object per row with the header names as keys.",
      "Copy the rows of this CSV whose city is Lakeview, with the header line first.",
      "Convert this CSV table to a Markdown table with the same columns and rows."}},
};

}  // namespace

std::span<const CopyDocument> copy_documents() { return kDocuments; }

}  // namespace vosti::bench

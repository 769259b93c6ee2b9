package balancebench.jvm;

import java.io.Serializable;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;

import org.apache.spark.sql.Column;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.objects.Invoke;
import org.apache.spark.sql.classic.ExpressionUtils;
import org.apache.spark.sql.types.AbstractDataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.ObjectType;
import org.apache.spark.unsafe.hash.Murmur3_x86_32;

/**
 * Storage routing ONE by a routing table (paper 000 Algorithm 1) and paper 001's bucket map,
 * as one method call per tuple inside Spark's generated code: the decisions of
 * {@code RoutingTable.storage_nodes} and {@code BucketMap.storage_nodes} in
 * {@code balancebench.routing_table} (the reference: tests compare the two tuple for tuple).
 *
 * <p>A routing table maps a key to its entry: a key outside it goes home, {@code pmod(hash(key),
 * N)}; a key moved whole reads its node; a split key's tuple takes the first part whose
 * {@code hi} exceeds its unit, the low 20 bits of {@code hash(tuple_id, SALT)} (SQL's {@code
 * hash} of two columns: a second Murmur3 round seeded by the first). The keys close together
 * (integer ids, as most streams' keys are) sit in a dense array indexed by the key, the
 * others in an open-addressing table behind a one-bit filter: one read of a small array
 * where the SQL path read arrays through a chain of expressions.
 *
 * <p>The table rides the plan as a literal object (an {@code Invoke} on it, so Spark's
 * generated code calls {@link #node} directly); its {@code toString} is a one-line summary,
 * so the plan and the event log never print its arrays.
 *
 * <p>Arrays arrive as little-endian bytes: keys int64 (sorted, one per entry), offsets
 * int64 (entries + 1: entry i's parts are [offsets[i], offsets[i + 1])), hi int64 and node
 * int32 per part.
 */
public final class TableRouting implements Serializable {
  private static final long serialVersionUID = 1L;

  /** Spark's hash seed ({@code hash(key)}, F(k)). */
  private static final int HASH_SEED = 42;
  /** An empty slot's entry. */
  private static final long EMPTY = -1L;
  /** Keys further apart than this start a new run when the dense block is chosen. */
  private static final long DENSE_GAP = 64;
  /** The dense block's slots per key at most, and its keys at least. */
  private static final int DENSE_SLOTS_PER_KEY = 8;
  private static final int DENSE_MIN_KEYS = 16;

  private final NodeOf home;
  private final long salt;
  private final int unitMask;
  private final int entries;
  private final int parts;
  /**
   * The dense block: for the largest run of keys close together (integer ids: topics,
   * suppliers, words), an array indexed by {@code key - denseLo}, at most {@link
   * #DENSE_SLOTS_PER_KEY} ints a key: one read, no hash, no key to compare. An entry is
   * {@code -1} (not in the table), a node ({@code >= 0}), or {@code -2 - j}: split key
   * {@code j}, its parts at {@code splitRefs[j]}. Measured on the default TOPK batches at
   * 10,000 keys: the hash table's probes cost the routing stage 21% against no table, its
   * cold keys' slots missed the cache, which the batch streaming through the task keeps
   * evicting (a plain loop of the same lookups: 5-7 ns).
   */
  private final long denseLo;
  private final long denseSpan;
  private final int[] dense;
  /** Split keys' parts in {@link #partPairs}: the high half their count, the low the first. */
  private final long[] splitRefs;
  /** The other keys: an open-addressing table of about 1.6 slots a key. */
  private final int nSlots;
  /**
   * One bit per slot of a second hash of every key of the hash table: a key whose bit is
   * clear is not in it and goes home without a probe (most of a stream's keys are not in a
   * planner's table).
   */
  private final long[] filter;
  private final int filterShift;
  /**
   * Slot {@code s} is {@code slots[2s]} (its key) and {@code slots[2s + 1]} (its entry), side
   * by side so that a probe reads one cache line. An entry is {@link #EMPTY}, or a key moved
   * whole's node (the high half 0), or a split key's parts as in {@link #splitRefs}.
   */
  private final long[] slots;
  /** Split keys' parts as (hi, node) pairs, each key's contiguous and in share order. */
  private final int[] partPairs;

  private TableRouting(
      int nNodes, long salt, int units, long[] keys, long[] offsets, long[] hi, int[] node) {
    this.home = new NodeOf(nNodes);
    this.salt = salt;
    this.unitMask = units - 1;
    this.entries = keys.length;
    this.parts = node.length;
    int[] block = denseBlock(keys);
    int first = block[0];
    int last = block[1];
    this.denseLo = last > first ? keys[first] : 0;
    this.denseSpan = last > first ? keys[last - 1] - keys[first] + 1 : 0;
    dense = new int[(int) denseSpan];
    java.util.Arrays.fill(dense, -1);
    int hashed = keys.length - (last - first);
    // 60% full: a hit reads about 1.75 slots, most in the line of the first; not a power
    // of two, which would leave it a third full or less for some sizes.
    int n = Math.max(2, (int) Math.ceil(hashed / 0.6));
    this.nSlots = n;
    // 16 bits a key: a key outside the table finds its bit set about 6% of the time.
    int bits = Math.max(64, Integer.highestOneBit(Math.max(16 * hashed, 1) - 1) << 1);
    this.filterShift = 32 - Integer.numberOfTrailingZeros(bits);
    filter = new long[bits / 64];
    slots = new long[2 * n];
    for (int s = 0; s < n; s++) {
      slots[2 * s + 1] = EMPTY;
    }
    int splitKeys = 0;
    int splitParts = 0;
    for (int i = 0; i < keys.length; i++) {
      int count = (int) (offsets[i + 1] - offsets[i]);
      if (count > 1) {
        splitKeys++;
        splitParts += count;
      }
    }
    splitRefs = new long[splitKeys];
    partPairs = new int[2 * splitParts];
    int at = 0;
    int split = 0;
    for (int i = 0; i < keys.length; i++) {
      int firstPart = (int) offsets[i];
      int count = (int) (offsets[i + 1] - offsets[i]);
      long entry;
      if (count == 1) {
        entry = node[firstPart];
      } else {
        entry = ((long) count << 32) | at;
        splitRefs[split++] = entry;
        for (int p = 0; p < count; p++) {
          partPairs[2 * at] = (int) hi[firstPart + p];
          partPairs[2 * at + 1] = node[firstPart + p];
          at++;
        }
      }
      if (i >= first && i < last) {
        dense[(int) (keys[i] - denseLo)] = count == 1 ? (int) entry : -2 - (split - 1);
        continue;
      }
      int keyHash = Murmur3_x86_32.hashLong(keys[i], HASH_SEED);
      int bit = filterBit(keyHash);
      filter[bit >>> 6] |= 1L << bit;
      int s = slot(keyHash);
      while (slots[2 * s + 1] != EMPTY) {
        s = s + 1 == nSlots ? 0 : s + 1;
      }
      slots[2 * s] = keys[i];
      slots[2 * s + 1] = entry;
    }
  }

  /**
   * {@code [first, last)}: the keys (sorted) of the dense block, the run with the most keys
   * whose neighbours lie at most {@link #DENSE_GAP} apart, when it has at least {@link
   * #DENSE_MIN_KEYS} keys and spans at most {@link #DENSE_SLOTS_PER_KEY} slots a key; else
   * an empty block.
   */
  static int[] denseBlock(long[] keys) {
    int bestFirst = 0;
    int bestLast = 0;
    int first = 0;
    for (int i = 1; i <= keys.length; i++) {
      boolean ends = i == keys.length || keys[i] - keys[i - 1] > DENSE_GAP || keys[i] < keys[i - 1];
      if (ends) {
        if (i - first > bestLast - bestFirst) {
          bestFirst = first;
          bestLast = i;
        }
        first = i;
      }
    }
    int count = bestLast - bestFirst;
    if (count < DENSE_MIN_KEYS) {
      return new int[] {0, 0};
    }
    // Neighbours at most DENSE_GAP apart: the span fits a long; bounded by the slots a key.
    long span = keys[bestLast - 1] - keys[bestFirst] + 1;
    if (span > (long) DENSE_SLOTS_PER_KEY * count || span > Integer.MAX_VALUE - 8) {
      return new int[] {0, 0};
    }
    return new int[] {bestFirst, bestLast};
  }

  /** A key's first slot: its hash times the golden ratio (Fibonacci hashing), scaled to
   * the slots (Lemire's multiply-shift, no division). Not the hash's low bits: F(k) takes a
   * power-of-two N's node from them, and a planner's table holds the keys of a few
   * overloaded nodes. */
  private int slot(int keyHash) {
    return (int) (((keyHash * 0x9E3779B9) & 0xFFFFFFFFL) * nSlots >>> 32);
  }

  /** A key's bit in {@link #filter}: the top bits of another multiple of its hash. */
  private int filterBit(int keyHash) {
    return (keyHash * 0x85EBCA6B) >>> filterShift;
  }

  /** The node of a tuple of {@code key} with id {@code tupleId}. */
  public int node(long key, long tupleId) {
    if (Long.compareUnsigned(key - denseLo, denseSpan) < 0) {
      int entry = dense[(int) (key - denseLo)];
      if (entry >= 0) {
        return entry;
      }
      if (entry == -1) {
        return home.of(Murmur3_x86_32.hashLong(key, HASH_SEED));
      }
      return part(splitRefs[-2 - entry], tupleId);
    }
    int h = Murmur3_x86_32.hashLong(key, HASH_SEED);
    int bit = filterBit(h);
    if ((filter[bit >>> 6] & (1L << bit)) == 0) {
      return home.of(h);
    }
    for (int s = slot(h); ; s = s + 1 == nSlots ? 0 : s + 1) {
      long entry = slots[2 * s + 1];
      if (entry == EMPTY) {
        return home.of(h);
      }
      if (slots[2 * s] == key) {
        return (entry >>> 32) == 0 ? (int) entry : part(entry, tupleId);
      }
    }
  }

  /** A split key's tuple: the first of its parts ({@code ref}: count, first) whose hi
   * exceeds the tuple's unit (the last part's hi exceeds them all). A few parts are
   * counted without a branch (a split key's tuples take its parts at random, which a
   * branch would mispredict half the time); many, by a binary search. */
  private int part(long ref, long tupleId) {
    int unit = Murmur3_x86_32.hashLong(salt, Murmur3_x86_32.hashLong(tupleId, HASH_SEED));
    unit &= unitMask;
    int lo = (int) ref;
    int count = (int) (ref >>> 32);
    if (count <= 8) {
      int at = lo;
      for (int p = lo; p < lo + count - 1; p++) {
        at += partPairs[2 * p] <= unit ? 1 : 0;
      }
      return partPairs[2 * at + 1];
    }
    int hi = lo + count - 1;
    while (lo < hi) {
      int mid = (lo + hi) >>> 1;
      if (partPairs[2 * mid] <= unit) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return partPairs[2 * lo + 1];
  }

  private int hashedKeys() {
    int count = 0;
    for (int s = 0; s < nSlots; s++) {
      count += slots[2 * s + 1] == EMPTY ? 0 : 1;
    }
    return count;
  }

  @Override
  public String toString() {
    return "routing table ("
        + entries
        + " keys, "
        + parts
        + " parts, "
        + (entries - hashedKeys())
        + " of them in a dense block, N = "
        + home.n
        + ")";
  }

  /**
   * The storage node of every tuple as a column: {@code key} and {@code tupleId} long
   * columns, the table as described above, {@code salt} the tuple hash's salt and {@code
   * units} the fraction units (a power of two).
   */
  public static Column storageNode(
      Column key,
      Column tupleId,
      int nNodes,
      long salt,
      int units,
      byte[] keys,
      byte[] offsets,
      byte[] hi,
      byte[] nodes) {
    TableRouting table =
        new TableRouting(
            nNodes, salt, units, longs(keys), longs(offsets), longs(hi), ints(nodes));
    return call(table, TableRouting.class, List.of(key, tupleId));
  }

  /** Paper 001's bucket map: {@code owner[pmod(hash(key, salt), B)]}. */
  public static final class BucketOwners implements Serializable {
    private static final long serialVersionUID = 1L;
    private final long salt;
    private final int[] owner;
    private final NodeOf bucket;

    BucketOwners(long salt, int[] owner) {
      this.salt = salt;
      this.owner = owner;
      this.bucket = new NodeOf(owner.length);
    }

    /** The node of a tuple of {@code key}. */
    public int node(long key) {
      int h = Murmur3_x86_32.hashLong(salt, Murmur3_x86_32.hashLong(key, HASH_SEED));
      return owner[bucket.of(h)];
    }

    @Override
    public String toString() {
      return "bucket map (" + owner.length + " buckets)";
    }
  }

  /** The owner of every tuple's bucket as a column ({@code owners}: int32 per bucket). */
  public static Column bucketOwner(Column key, long salt, byte[] owners) {
    return call(new BucketOwners(salt, ints(owners)), BucketOwners.class, List.of(key));
  }

  /**
   * {@code pmod(h, n)} ({@code Math.floorMod}) for a fixed {@code n} without a division
   * per tuple: a mask where {@code n} is a power of two, else a multiplication by the
   * reciprocal, corrected to the exact remainder. Spark's generated code divides by a
   * constant, which the JIT turns into shifts and multiplications; a division by a field
   * cost 10 ns a tuple (measured: F(k) 11 ns in a plain loop, a one-key table's lookup 21).
   */
  static final class NodeOf implements Serializable {
    private static final long serialVersionUID = 1L;
    final int n;
    private final int mask;
    private final double reciprocal;
    /** {@code 2^31 mod n}: {@code h + 2^31} is never negative. */
    private final long offset;

    NodeOf(int n) {
      this.n = n;
      this.mask = Integer.bitCount(n) == 1 ? n - 1 : -1;
      this.reciprocal = 1.0 / n;
      this.offset = (1L << 31) % n;
    }

    int of(int h) {
      if (mask >= 0) {
        return h & mask;
      }
      long a = (long) h + (1L << 31); // in [0, 2^32): the quotient's estimate is off by 1 at most
      long r = a - (long) (a * reciprocal) * n;
      if (r < 0) {
        r += n;
      } else if (r >= n) {
        r -= n;
      }
      r -= offset;
      return (int) (r < 0 ? r + n : r);
    }
  }

  /** {@code target.node(args...)} as an expression Spark's generated code calls directly
   * (not null-propagating: the columns are never null). */
  private static Column call(Object target, Class<?> cls, List<Column> args) {
    Expression literal = Literal.create(target, new ObjectType(cls));
    List<Expression> exprs = args.stream().map(ExpressionUtils::expression).toList();
    scala.collection.immutable.Seq<Expression> arguments =
        scala.jdk.javaapi.CollectionConverters.asScala(exprs).toSeq();
    scala.collection.immutable.Seq<AbstractDataType> types = Invoke.apply$default$5();
    Invoke invoke =
        new Invoke(literal, "node", DataTypes.IntegerType, arguments, types, false, false, true);
    return ExpressionUtils.column(invoke);
  }

  private static long[] longs(byte[] bytes) {
    long[] out = new long[bytes.length / 8];
    ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN).asLongBuffer().get(out);
    return out;
  }

  private static int[] ints(byte[] bytes) {
    int[] out = new int[bytes.length / 4];
    ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN).asIntBuffer().get(out);
    return out;
  }
}

package balancebench.jvm;

import java.io.Serializable;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
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
 * <p>A routing table is an open-addressing map from key to entry (linear probing, at most
 * half full): a key outside it goes home, {@code pmod(hash(key), N)}; a key moved whole
 * reads its node; a split key's tuple takes the first part whose {@code hi} exceeds its
 * unit, the low 20 bits of {@code hash(tuple_id, SALT)} (SQL's {@code hash} of two
 * columns: a second Murmur3 round seeded by the first). One probe of a small array where
 * the SQL path read arrays through a chain of expressions.
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
  /** An empty slot. */
  private static final int EMPTY = -1;

  private final int nNodes;
  private final long salt;
  private final int unitMask;
  private final int entries;
  private final int parts;
  private final int shift;
  private final int mask;
  private final long[] slotKey;
  /** {@code >= 0}: the node of a key moved whole; {@code <= -2}: split key -(entry + 2). */
  private final int[] slotEntry;
  /** Per split key its first part in {@link #partHi}, then one past the last key's last. */
  private final int[] splitStart;
  private final int[] partHi;
  private final int[] partNode;

  private TableRouting(
      int nNodes, long salt, int units, long[] keys, long[] offsets, long[] hi, int[] node) {
    this.nNodes = nNodes;
    this.salt = salt;
    this.unitMask = units - 1;
    this.entries = keys.length;
    this.parts = node.length;
    int slots = Integer.highestOneBit(Math.max(2 * keys.length, 2) - 1) << 1;
    this.shift = 32 - Integer.numberOfTrailingZeros(slots);
    this.mask = slots - 1;
    slotKey = new long[slots];
    slotEntry = new int[slots];
    Arrays.fill(slotEntry, EMPTY);
    int split = 0;
    for (int i = 0; i < keys.length; i++) {
      if (offsets[i + 1] - offsets[i] > 1) {
        split++;
      }
    }
    splitStart = new int[split + 1];
    int splitParts = 0;
    for (int i = 0; i < keys.length; i++) {
      int count = (int) (offsets[i + 1] - offsets[i]);
      if (count > 1) {
        splitParts += count;
      }
    }
    partHi = new int[splitParts];
    partNode = new int[splitParts];
    int s = 0;
    int at = 0;
    for (int i = 0; i < keys.length; i++) {
      int first = (int) offsets[i];
      int count = (int) (offsets[i + 1] - offsets[i]);
      int entry;
      if (count == 1) {
        entry = node[first];
      } else {
        splitStart[s] = at;
        for (int p = 0; p < count; p++) {
          partHi[at] = (int) hi[first + p];
          partNode[at] = node[first + p];
          at++;
        }
        entry = -(s + 2);
        s++;
      }
      int slot = slot(Murmur3_x86_32.hashLong(keys[i], HASH_SEED));
      while (slotEntry[slot] != EMPTY) {
        slot = (slot + 1) & mask;
      }
      slotKey[slot] = keys[i];
      slotEntry[slot] = entry;
    }
    splitStart[split] = at;
  }

  /** A key's first slot: the top bits of its hash times the golden ratio (Fibonacci
   * hashing). Not the hash's low bits: F(k) takes a power-of-two N's node from them, and a
   * planner's table holds the keys of a few overloaded nodes. */
  private int slot(int keyHash) {
    return (keyHash * 0x9E3779B9) >>> shift & mask;
  }

  /** The node of a tuple of {@code key} with id {@code tupleId}. */
  public int node(long key, long tupleId) {
    int h = Murmur3_x86_32.hashLong(key, HASH_SEED);
    for (int s = slot(h); ; s = (s + 1) & mask) {
      int entry = slotEntry[s];
      if (entry == EMPTY) {
        return Math.floorMod(h, nNodes);
      }
      if (slotKey[s] == key) {
        if (entry >= 0) {
          return entry;
        }
        int split = -(entry + 2);
        int unit = Murmur3_x86_32.hashLong(salt, Murmur3_x86_32.hashLong(tupleId, HASH_SEED));
        unit &= unitMask;
        int lo = splitStart[split];
        int hi = splitStart[split + 1] - 1;
        while (lo < hi) {
          int mid = (lo + hi) >>> 1;
          if (partHi[mid] <= unit) {
            lo = mid + 1;
          } else {
            hi = mid;
          }
        }
        return partNode[lo];
      }
    }
  }

  @Override
  public String toString() {
    return "routing table (" + entries + " keys, " + parts + " parts, N = " + nNodes + ")";
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

    BucketOwners(long salt, int[] owner) {
      this.salt = salt;
      this.owner = owner;
    }

    /** The node of a tuple of {@code key}. */
    public int node(long key) {
      int h = Murmur3_x86_32.hashLong(salt, Murmur3_x86_32.hashLong(key, HASH_SEED));
      return owner[Math.floorMod(h, owner.length)];
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

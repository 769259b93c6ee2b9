package balancebench.jvm;

import java.io.Serializable;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.NoSuchElementException;

import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.codegen.UnsafeRowWriter;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.hash.Murmur3_x86_32;
import org.apache.spark.util.CollectionAccumulator;

/**
 * PKG, D-Choices and W-Choices' per-sender routing inside Spark's JVM: the decisions of
 * {@code balancebench.strategies.pkg} (PkgStrategy.route_sender with its Space-Saving
 * sketch and choose_nodes), repeated here so that a sender's tuples never leave the JVM
 * (the Python path ships them to a Python worker and back through Arrow, about 170 ns a
 * tuple). The Python code is the reference: tests compare the two tuple for tuple.
 *
 * <p>Partition {@code s} of the batch is sender {@code s}'s tuples in arrival order. Each
 * task routes its partition from the sender's state (tuples sent per node, tuples seen,
 * the sketch), streaming: one chunk of {@code chunk} tuples at a time, the sketch updated
 * with the chunk before its tuples are routed. At its last row it adds the sender's new
 * state to an accumulator, which the driver reads after the batch's job.
 *
 * <p>States travel as little-endian bytes, one record per sender: int32 sender, int32
 * nodes N, int64 seen, N x int64 sent, int32 m, m x int64 sketch keys (sorted), m x int64
 * sketch counts (balancebench.spark.jvm_routing encodes and decodes them).
 *
 * <p>Compiled by {@code make setup} with the JDK's javac (nothing compiled is committed).
 */
public final class PerSenderRouting {

  private PerSenderRouting() {}

  private static final scala.reflect.ClassTag<InternalRow> INTERNAL_ROW =
      scala.reflect.ClassTag$.MODULE$.apply(InternalRow.class);

  /** Spark's hash seed ({@code hash(key)}, F(k)). */
  private static final int HASH_SEED = 42;

  /** The routed rows and the accumulator the senders' new states arrive in. */
  public static final class Routed {
    private final Dataset<Row> frame;
    private final CollectionAccumulator<byte[]> reports;

    Routed(Dataset<Row> frame, CollectionAccumulator<byte[]> reports) {
      this.frame = frame;
      this.reports = reports;
    }

    public Dataset<Row> frame() {
      return frame;
    }

    /** After the batch's job: the senders' new states (a rerun task's report repeats). */
    public byte[][] reports() {
      return reports.value().toArray(new byte[0][]);
    }
  }

  /**
   * {@code (key, node)} for every tuple of {@code batch} (column {@code key}, long).
   *
   * @param d candidates of a heavy key (2 for PKG; N for W-Choices)
   * @param allNodes a heavy key may go to every node (W-Choices: d == N > 2)
   * @param sketch heavy hitters are detected (D-/W-Choices); false: no key is heavy
   * @param theta heavy-hitter threshold, a share of the tuples the sender has seen
   * @param capacity Space-Saving counters per sender
   * @param chunk tuples per sketch update
   * @param salts the salts of H2, H3, ... as little-endian int64
   * @param states the senders' states from earlier batches (records, see above)
   */
  public static Routed route(
      Dataset<Row> batch,
      int nNodes,
      int d,
      boolean allNodes,
      boolean sketch,
      double theta,
      int capacity,
      int chunk,
      byte[] salts,
      byte[] states) {
    CollectionAccumulator<byte[]> reports =
        batch.sparkSession().sparkContext().collectionAccumulator("per-sender states");
    ByteBuffer saltBytes = ByteBuffer.wrap(salts).order(ByteOrder.LITTLE_ENDIAN);
    long[] saltValues = new long[salts.length / 8];
    for (int i = 0; i < saltValues.length; i++) {
      saltValues[i] = saltBytes.getLong();
    }
    Map<Integer, byte[]> bySender = new HashMap<>();
    ByteBuffer in = ByteBuffer.wrap(states).order(ByteOrder.LITTLE_ENDIAN);
    while (in.hasRemaining()) {
      int start = in.position();
      int sender = SenderState.read(in).sender;
      bySender.put(sender, Arrays.copyOfRange(states, start, in.position()));
    }
    Router router =
        new Router(
            nNodes, d, allNodes, sketch, theta, capacity, chunk, saltValues, bySender, reports);
    StructType schema =
        new StructType().add("key", DataTypes.LongType).add("node", DataTypes.IntegerType);
    // Spark's internal rows in and out (no Row objects, no encoders): the keys' plan
    // runs as before, the routing pipelines into the same stage.
    Dataset<Row> keys = batch.select("key");
    RDD<InternalRow> rows = ((org.apache.spark.sql.classic.Dataset<Row>) keys).queryExecution().toRdd();
    RDD<InternalRow> routed = JavaRDD.fromRDD(rows, INTERNAL_ROW).mapPartitions(router).rdd();
    SparkSession session = (SparkSession) batch.sparkSession();
    return new Routed(session.internalCreateDataFrame(routed, schema, false), reports);
  }

  /**
   * What one sender knows: tuples seen, tuples sent per node, and its Space-Saving sketch
   * ({@code pkg.space_saving_merge}) held unsorted with a hash index (the bytes hold it
   * sorted by key, as the library does).
   */
  static final class SenderState {
    int sender;
    long seen;
    long[] sent;
    long[] sketchKeys = new long[0];
    long[] sketchCounts = new long[0];
    int size = 0;
    private LongIndex index = new LongIndex(0);
    // Per chunk: the keys new to the sketch, and the heavy hitters after the merge.
    private LongIndex fresh = new LongIndex(0);
    private long[] freshKeys = new long[0];
    private long[] freshCounts = new long[0];
    private LongIndex hot = new LongIndex(0);
    private int hotCount = 0;

    static SenderState read(ByteBuffer in) {
      SenderState s = new SenderState();
      s.sender = in.getInt();
      int n = in.getInt();
      s.seen = in.getLong();
      s.sent = new long[n];
      for (int i = 0; i < n; i++) {
        s.sent[i] = in.getLong();
      }
      int m = in.getInt();
      s.sketchKeys = new long[m];
      s.sketchCounts = new long[m];
      for (int i = 0; i < m; i++) {
        s.sketchKeys[i] = in.getLong();
      }
      for (int i = 0; i < m; i++) {
        s.sketchCounts[i] = in.getLong();
      }
      s.size = m;
      s.reindex();
      return s;
    }

    byte[] write() {
      long[] keys = Arrays.copyOf(sketchKeys, size);
      Arrays.sort(keys);
      ByteBuffer out =
          ByteBuffer.allocate(4 + 4 + 8 + 8 * sent.length + 4 + 16 * size)
              .order(ByteOrder.LITTLE_ENDIAN);
      out.putInt(sender).putInt(sent.length).putLong(seen);
      for (long v : sent) {
        out.putLong(v);
      }
      out.putInt(size);
      for (long v : keys) {
        out.putLong(v);
      }
      for (long v : keys) {
        out.putLong(sketchCounts[index.get(v)]);
      }
      return out.array();
    }

    private void reindex() {
      if (index.capacity() < 2 * size) {
        index = new LongIndex(size);
      } else {
        index.clear();
      }
      for (int i = 0; i < size; i++) {
        index.put(sketchKeys[i], i);
      }
    }

    /**
     * Merge a chunk's exact counts into the Space-Saving summary of {@code capacity}
     * counters: a key new to a full summary starts from its minimum count; the largest
     * counts are kept, among equal counts the smaller keys (the library's rule).
     */
    void merge(long[] chunk, int length, int capacity) {
      long floor = 0;
      if (size >= capacity) {
        floor = Long.MAX_VALUE;
        for (int i = 0; i < size; i++) {
          floor = Math.min(floor, sketchCounts[i]);
        }
      }
      if (freshKeys.length < length) {
        fresh = new LongIndex(length);
        freshKeys = new long[length];
        freshCounts = new long[length];
      } else {
        fresh.clear();
      }
      int added = 0;
      for (int i = 0; i < length; i++) {
        long key = chunk[i];
        int at = index.get(key);
        if (at >= 0) {
          sketchCounts[at]++;
          continue;
        }
        int q = fresh.get(key);
        if (q < 0) {
          q = added++;
          fresh.put(key, q);
          freshKeys[q] = key;
          freshCounts[q] = floor;
        }
        freshCounts[q]++;
      }
      if (added == 0 && size <= capacity) {
        return;
      }
      int total = size + added;
      if (sketchKeys.length < total) {
        sketchKeys = Arrays.copyOf(sketchKeys, Math.max(total, 2 * sketchKeys.length));
        sketchCounts = Arrays.copyOf(sketchCounts, sketchKeys.length);
      }
      System.arraycopy(freshKeys, 0, sketchKeys, size, added);
      System.arraycopy(freshCounts, 0, sketchCounts, size, added);
      size = total;
      if (size > capacity) {
        keepLargest(capacity);
      }
      reindex();
    }

    /** Keep the {@code capacity} largest counts, among equal counts the smaller keys. */
    private void keepLargest(int capacity) {
      long bar = select(Arrays.copyOf(sketchCounts, size), size, size - capacity);
      int above = 0;
      int tied = 0;
      for (int i = 0; i < size; i++) {
        if (sketchCounts[i] > bar) {
          above++;
        } else if (sketchCounts[i] == bar) {
          tied++;
        }
      }
      int need = capacity - above; // >= 1: bar is the capacity-th largest count
      long lastKey = Long.MAX_VALUE;
      if (tied > need) {
        long[] ties = new long[tied];
        int t = 0;
        for (int i = 0; i < size; i++) {
          if (sketchCounts[i] == bar) {
            ties[t++] = sketchKeys[i];
          }
        }
        lastKey = select(ties, tied, need - 1);
      }
      int kept = 0;
      for (int i = 0; i < size; i++) {
        long c = sketchCounts[i];
        if (c > bar || (c == bar && sketchKeys[i] <= lastKey)) {
          sketchKeys[kept] = sketchKeys[i];
          sketchCounts[kept] = c;
          kept++;
        }
      }
      size = kept;
    }

    /** The heavy hitters after a merge: keys whose counter holds at least {@code bar}. */
    void findHot(double bar) {
      if (hot.capacity() < 2 * size) {
        hot = new LongIndex(size);
      } else {
        hot.clear();
      }
      hotCount = 0;
      for (int i = 0; i < size; i++) {
        if ((double) sketchCounts[i] >= bar) {
          hot.put(sketchKeys[i], i);
          hotCount++;
        }
      }
    }

    boolean heavy(long key) {
      return hotCount > 0 && hot.get(key) >= 0;
    }
  }

  /** The {@code k}-th smallest of {@code a[0..n)} (0-based; reorders {@code a}). */
  static long select(long[] a, int n, int k) {
    int lo = 0;
    int hi = n - 1;
    while (lo < hi) {
      long x = a[lo];
      long y = a[(lo + hi) >>> 1];
      long z = a[hi];
      long pivot = Math.max(Math.min(x, y), Math.min(Math.max(x, y), z));
      int i = lo;
      int j = hi;
      while (i <= j) {
        while (a[i] < pivot) {
          i++;
        }
        while (a[j] > pivot) {
          j--;
        }
        if (i <= j) {
          long swap = a[i];
          a[i] = a[j];
          a[j] = swap;
          i++;
          j--;
        }
      }
      if (k <= j) {
        hi = j;
      } else if (k >= i) {
        lo = i;
      } else {
        return a[k];
      }
    }
    return a[k];
  }

  /** Open addressing from long keys to non-negative ints (-1: absent). */
  static final class LongIndex {
    private long[] keys;
    private int[] values;
    private int mask;

    LongIndex(int expected) {
      int slots = Integer.highestOneBit(Math.max(4 * expected, 16) - 1) << 1;
      keys = new long[slots];
      values = new int[slots];
      mask = slots - 1;
      Arrays.fill(values, -1);
    }

    int capacity() {
      return keys.length / 2;
    }

    void clear() {
      Arrays.fill(values, -1);
    }

    private int slot(long key) {
      long h = key * 0x9E3779B97F4A7C15L;
      return (int) (h ^ (h >>> 32)) & mask;
    }

    int get(long key) {
      for (int s = slot(key); ; s = (s + 1) & mask) {
        int v = values[s];
        if (v < 0 || keys[s] == key) {
          return v;
        }
      }
    }

    void put(long key, int value) {
      int s = slot(key);
      while (values[s] >= 0 && keys[s] != key) {
        s = (s + 1) & mask;
      }
      keys[s] = key;
      values[s] = value;
    }
  }

  /** One task's routing of its sender's tuples. */
  static final class Router
      implements FlatMapFunction<Iterator<InternalRow>, InternalRow>, Serializable {
    private static final long serialVersionUID = 1L;
    /** Tuples per decision pass where no sketch is kept (any size decides the same). */
    private static final int PLAIN_CHUNK = 4096;

    private final int nNodes;
    private final int d;
    private final boolean allNodes;
    private final boolean sketch;
    private final double theta;
    private final int capacity;
    private final int chunk;
    private final long[] salts;
    private final Map<Integer, byte[]> states;
    private final CollectionAccumulator<byte[]> reports;

    Router(
        int nNodes,
        int d,
        boolean allNodes,
        boolean sketch,
        double theta,
        int capacity,
        int chunk,
        long[] salts,
        Map<Integer, byte[]> states,
        CollectionAccumulator<byte[]> reports) {
      this.nNodes = nNodes;
      this.d = d;
      this.allNodes = allNodes;
      this.sketch = sketch;
      this.theta = theta;
      this.capacity = capacity;
      this.chunk = sketch ? chunk : PLAIN_CHUNK;
      this.salts = salts;
      this.states = states;
      this.reports = reports;
    }

    @Override
    public Iterator<InternalRow> call(Iterator<InternalRow> rows) {
      int sender = TaskContext.getPartitionId();
      byte[] blob = states.get(sender);
      SenderState state;
      if (blob != null) {
        state = SenderState.read(ByteBuffer.wrap(blob).order(ByteOrder.LITTLE_ENDIAN));
      } else {
        state = new SenderState();
        state.sender = sender;
        state.sent = new long[nNodes];
      }
      return new Routing(rows, state);
    }

    /** Candidate {@code c} (0 = F(k)) of a key whose Spark hash is {@code first}. */
    private int candidate(int first, int c) {
      if (c == 0) {
        return Math.floorMod(first, nNodes);
      }
      return Math.floorMod(Murmur3_x86_32.hashLong(salts[c - 1], first), nNodes);
    }

    /** {@code pkg.choose_nodes} for one tuple: its node; counts it as sent. */
    private int choose(long key, boolean heavy, long[] sent) {
      int first = Murmur3_x86_32.hashLong(key, HASH_SEED);
      int j;
      if (heavy && allNodes) {
        j = 0;
        for (int x = 1; x < nNodes; x++) {
          if (sent[x] < sent[j]) {
            j = x;
          }
        }
      } else if (heavy && d > 2) {
        j = candidate(first, 0);
        for (int c = 1; c < d; c++) {
          int x = candidate(first, c);
          if (sent[x] < sent[j]) {
            j = x;
          }
        }
      } else {
        int a = candidate(first, 0);
        int b = candidate(first, 1);
        j = sent[a] <= sent[b] ? a : b;
      }
      sent[j]++;
      return j;
    }

    /** Streams a partition: reads a chunk, updates the sketch, routes the chunk. */
    private final class Routing implements Iterator<InternalRow> {
      private final Iterator<InternalRow> rows;
      private final UnsafeRowWriter writer = new UnsafeRowWriter(2);
      private final SenderState state;
      // Grown up to `chunk` as a partition's tuples arrive (a chunk may be far larger
      // than a partition).
      private long[] keys = new long[Math.min(chunk, 4096)];
      private int[] nodes = new int[keys.length];
      private int length = 0;
      private int next = 0;
      private boolean reported = false;

      Routing(Iterator<InternalRow> rows, SenderState state) {
        this.rows = rows;
        this.state = state;
      }

      @Override
      public boolean hasNext() {
        if (next < length) {
          return true;
        }
        length = 0;
        next = 0;
        while (length < chunk && rows.hasNext()) {
          if (length == keys.length) {
            keys = Arrays.copyOf(keys, (int) Math.min(chunk, 2L * keys.length));
            nodes = new int[keys.length];
          }
          keys[length++] = rows.next().getLong(0);
        }
        if (length == 0) {
          if (!reported) {
            reported = true;
            reports.add(state.write());
          }
          return false;
        }
        if (sketch) {
          state.merge(keys, length, capacity);
          state.findHot(theta * (double) (state.seen + length));
        }
        state.seen += length;
        for (int i = 0; i < length; i++) {
          boolean heavy = sketch && state.heavy(keys[i]);
          nodes[i] = choose(keys[i], heavy, state.sent);
        }
        return true;
      }

      @Override
      public InternalRow next() {
        if (!hasNext()) {
          throw new NoSuchElementException();
        }
        // One reused row, as Spark's own operators hand them on (the consumer copies).
        writer.reset();
        writer.zeroOutNullBytes();
        writer.write(0, keys[next]);
        writer.write(1, nodes[next]);
        next++;
        return writer.getRow();
      }
    }
  }
}
